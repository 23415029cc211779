// The CPU kernels' dtype checks that PyTorch's meta kernels (what eager outputs come from) skip.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::engine {

// Raises the CPU kernel's own error where the CPU refuses this call's dtypes:
//  - an out= tensor whose dtype is not the inputs' promoted type (neg(int64, out=int32): the CPU's
//    same-dtype ops refuse it, promoting ops accept a safe cast, generated out= wrappers want the
//    exact type);
//  - a matrix product of two dtypes (a bfloat16 Linear on float32 input);
//  - sub/rsub with a bool operand.
// The verdict is the CPU kernel's: the op runs there on one-element zero tensors of the call's
// dtypes (out= tensors empty), for calls of these kinds only, on plan misses only. A stand-in call
// that fails for any other reason (shapes) says nothing about dtypes and is ignored.
void check_dtypes_like_cpu(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args);

}  // namespace tpu::engine
