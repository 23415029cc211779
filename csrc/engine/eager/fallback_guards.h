// Checks made before an op runs on the CPU fallback, for CPU kernels that trust their
// arguments and read or write out of bounds otherwise (the fuzzer saw them corrupt the heap).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::engine {

// Throws ValueError naming the op when a call would make its CPU kernel touch memory it does
// not own: the fused optimizers (_fused_adam(w)/_fused_sgd/_fused_adagrad and their in-place
// and out= forms) with a state or gradient tensor shaped unlike its parameter. Throws RuntimeError
// for an FFT out= tensor of the wrong dtype and a _weight_norm_interface g of the wrong size.
void check_before_cpu_fallback(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

}  // namespace tpu::engine
