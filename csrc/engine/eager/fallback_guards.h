// Checks made before an op runs on the CPU fallback, for CPU kernels that trust their
// arguments and read or write out of bounds otherwise (the fuzzer saw them corrupt the heap).
// Each op's guard is part of its entry in the adapter table (op_adapters.h: before_cpu_fallback).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::engine {

// The fused optimizers (_fused_adam(w)/_fused_sgd/_fused_adagrad and their in-place and out=
// forms): ValueError naming the op for a state or gradient tensor shaped unlike its parameter.
void check_adam_state_shapes(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
void check_sgd_adagrad_state_shapes(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
// The FFT kernels write their result type into out= unchecked (a float out of _fft_r2c.out
// crashed the CPU kernel): RuntimeError unless out holds the type the op produces.
void check_fft_out_dtype(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
// _weight_norm_interface's CPU kernel reads g with v.size(dim) elements unchecked (heap damage
// with a smaller g); the message is the lowering rule's, which checks the same.
void check_weight_norm_g(const c10::OperatorHandle& op, const torch::jit::Stack& stack);
// embedding_dense_backward with scale_grad_by_freq counts indices in a num_weights-long buffer
// unchecked (heap corruption for an index out of range): IndexError first.
void check_embedding_backward_indices(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

}  // namespace tpu::engine
