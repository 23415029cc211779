// PyTorch's lazy conjugate and negative bits (z.conj(), torch._neg_view): a tensor's value is
// conj^c(neg^n(its stored elements)). Rules compute on values, so the engine resolves the bits
// before a rule sees a tensor, and copies translate between the bits of source and destination.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace tpu::engine {

inline bool has_math_bits(const at::Tensor& t) { return t.defined() && (t.is_conj() || t.is_neg()); }

// A view of the same elements with both bits cleared: the stored elements as values.
at::Tensor stored_elements(const at::Tensor& t);

// `src`'s elements transformed so that, stored under `dst`'s bits, they read as `src`'s values.
// `src` is a tpu tensor or a CPU tensor; the result is on src's device, without bits.
at::Tensor elements_for(const at::Tensor& dst, const at::Tensor& src);

// Replaces every read-only tensor argument that has a bit set by its resolved value. Returns
// false (stack untouched) if a written argument has a bit set: the caller runs the op another way.
bool resolve_math_bit_arguments(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args);

}  // namespace tpu::engine
