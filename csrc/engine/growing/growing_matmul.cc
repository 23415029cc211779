// matmul (and so linear) of a padded prefix with more than one row before its padded dim: a
// left-padded batch of prompts, [B, L, K] of a [B, C, K] bucket (growing_dims.h).
//
// PyTorch's matmul folds a [B, L, K] @ [K, N] into one mm of [B*L, K] rows: reshape, which for a
// padded prefix with B > 1 must copy the rows into a dense [B*L, K] (they are not a prefix of
// the bucket's B*C rows), so every projection of a padded batch would compile per length. Rows
// are independent in a matmul, so it runs over the whole bucket instead: the mm of [B*C, K] rows
// (a dense view), whose result is a padded prefix of [B, C, N] again; the spare rows' values
// never reach the true rows. A batch of one needs none of this (its [L, K] view of [C, K] is a
// padded prefix already). Batched products of two operands padded along one batch dim run over
// both buckets the same way.
//
// matmul is a CompositeImplicitAutograd op, so it is registered at AutogradPrivateUse1 (and at
// PrivateUse1, which inference_mode reaches directly). With autograd recording, the product of a
// padded batch by a matrix (every projection of a batched training step) records its own node,
// whose backward runs over the bucket too: the input's gradient is the same fold, the matrix's
// sums the bucket's rows with the spare ones zeroed in both operands (they hold anything, NaN
// included, and 0 * NaN is NaN). Other recorded products, and tensors that are not plain tpu
// tensors (fake or functional ones under torch.compile), run PyTorch's own composite.
#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/matmul_native.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

// The padded batch [.., L, .., K] whose fold would copy: padded along a dim before the last,
// with a dim of extent > 1 before the padded one.
std::optional<Spare> padded_batch(const at::Tensor& t) {
  if (t.dim() < 3 || !plain_tpu_tensor(t)) return std::nullopt;
  std::optional<Spare> s = spare_rows(t);
  if (!s || s->dim >= t.dim() - 1) return std::nullopt;
  for (int64_t d = 0; d < s->dim; ++d) {
    if (t.size(d) != 1) return s;
  }
  return std::nullopt;
}

bool same_rows(const std::optional<Spare>& a, const Spare& b) {
  return a && a->dim == b.dim && a->length == b.length && a->capacity == b.capacity;
}

// The whole bucket of `t` with its spare rows zeroed.
at::Tensor zero_spare_rows(const at::Tensor& t, const Spare& s) {
  return at::where(rows_below(s.capacity, s.length, s.dim, t.dim(), t), whole_capacity(t, s.dim, s.capacity),
                   at::scalar_tensor(0, t.options()));
}

// A padded batch [.., L, .., K] times a matrix [K, N], recorded for autograd as one node.
struct BatchRowsProduct : public torch::autograd::Function<BatchRowsProduct> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& self, const at::Tensor& other) {
    ctx->save_for_backward({self, other});
    return at::matmul(self, other);  // autograd is off here: the path over the bucket
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &self = saved[0], &other = saved[1], &grad = grads[0];
    at::Tensor grad_self, grad_other;
    if (ctx->needs_input_grad(0)) grad_self = at::matmul(grad, other.transpose(0, 1));
    if (ctx->needs_input_grad(1)) {
      std::optional<Spare> s = padded_batch(self);
      int64_t k = self.size(-1), n = grad.size(-1);
      // A double backward records through PyTorch's own ops, not through whole buckets.
      if (s && !c10::GradMode::is_enabled() && plain_tpu_tensor(grad) && same_rows(spare_rows(grad), *s)) {
        grad_other = zero_spare_rows(self, *s).reshape({-1, k}).t().mm(zero_spare_rows(grad, *s).reshape({-1, n}));
      } else {
        grad_other = self.reshape({-1, k}).t().mm(grad.reshape({-1, n}));
      }
    }
    return {grad_self, grad_other};
  }
};

at::Tensor matmul(const at::Tensor& self, const at::Tensor& other) {
  // Every tpu linear passes here: the common case (self not a padded batch) is decided first.
  std::optional<Spare> s = padded_batch(self);
  if (!s || !plain_tpu_tensor(other)) return at::native::matmul(self, other);
  if (c10::GradMode::is_enabled() && (self.requires_grad() || other.requires_grad())) {
    if (other.dim() == 2 && !spare_rows(other) && self.scalar_type() == other.scalar_type()) {
      return BatchRowsProduct::apply(self, other);
    }
    return at::native::matmul(self, other);
  }
  // The padded result is made below ADInplaceOrView, so it is not a view of the product (the
  // fold's result is not one either) and a later view() that needs a dense layout may move it.
  at::AutoDispatchBelowADInplaceOrView below_views;
  std::optional<Spare> o = spare_rows(other);
  if (other.dim() <= 2 && !o) {
    at::Tensor whole = whole_capacity(self, s->dim, s->capacity);
    return as_padded_prefix(at::native::matmul(whole, other), s->dim, s->length);
  }
  // Batched products of two tensors padded along the same batch dim (Qwen3.5's chunked delta
  // rule: [B, H, chunks, 64, D] products, the chunks a padded prefix): batches are independent.
  // An operand not padded there broadcasts along it (extent 1).
  bool batched = s->dim < self.dim() - 2 && other.dim() == self.dim();
  bool same_batch_rows = batched && (o ? o->dim == s->dim && o->length == s->length && o->capacity == s->capacity
                                       : other.size(s->dim) == 1);
  if (same_batch_rows) {
    at::Tensor whole_other = o ? whole_capacity(other, o->dim, o->capacity) : other;
    return as_padded_prefix(at::native::matmul(whole_capacity(self, s->dim, s->capacity), whole_other), s->dim,
                            s->length);
  }
  return at::native::matmul(self, other);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("matmul", matmul); }
// Below autograd too: under torch.inference_mode() the autograd keys are skipped.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("matmul", matmul); }

}  // namespace
}  // namespace tpu::engine
