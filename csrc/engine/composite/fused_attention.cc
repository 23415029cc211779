// scaled_dot_product_attention's fused path on tpu.
//
// PyTorch asks each device which SDPA backend to take (_fused_sdp_choice_stub); without an
// answer a PrivateUse1 device gets the math path, which ATen decomposes into ~10 ops (f32 upcast,
// bmm, _safe_softmax's isneginf/all/where, bmm), each a module of its own in eager mode. We answer
// `overrideable` for the calls our dense attention rule handles exactly (lowering/attention.cc)
// and `math` for the rest (dropout, masks that need a gradient, odd ranks or heads), so the math
// path still covers every call. The overrideable op and its backward (autograd's formula comes
// with PyTorch) run the rules through the ATen ops with the same math,
// _scaled_dot_product_flash_attention_for_cpu(_backward); their extra outputs (cumulative
// sequence lengths, RNG state, debug mask) are empty, as the meta kernel describes. Keys and
// values of a growing KV cache are attended over their whole capacity (engine/growing).
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/scaled_dot_product_attention_native.h>
#include <torch/library.h>

#include <limits>

#include "engine/call/target_modules.h"
#include "engine/compile/aot_check.h"
#include "engine/growing/growing_dims.h"

namespace tpu::engine {
namespace {

bool takes_fused_path(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                      const std::optional<at::Tensor>& mask, double dropout_p, bool enable_gqa) {
  if (!at::globalContext().userEnabledOverrideableSDP() || dropout_p != 0.0) return false;
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return false;
  if (q.scalar_type() != k.scalar_type() || q.scalar_type() != v.scalar_type()) return false;
  if (!at::isFloatingType(q.scalar_type())) return false;
  if (q.is_nested() || k.is_nested() || v.is_nested()) return false;
  // Sym sizes: under Dynamo with dynamic shapes the choice is made on fake tensors whose sizes
  // are symbolic (comparisons become guards), where numel()/size() throw.
  if (q.sym_numel() == 0 || k.sym_numel() == 0 || v.sym_numel() == 0) return false;
  if (k.sym_size(0) != q.sym_size(0) || v.sym_size(0) != q.sym_size(0) || v.sym_size(1) != k.sym_size(1) ||
      v.sym_size(2) != k.sym_size(2) || k.sym_size(3) != q.sym_size(3) || v.sym_size(3) != q.sym_size(3)) {
    return false;
  }
  // Fewer k/v heads only where the math path would repeat them (enable_gqa); otherwise the math
  // path raises PyTorch's own error for mismatched heads.
  if (k.sym_size(1) != q.sym_size(1) && !(enable_gqa && q.sym_size(1) % k.sym_size(1) == 0)) return false;
  if (mask.has_value() && mask->defined()) {
    // The fused backward has no gradient for the mask; a float mask of another dtype promotes
    // differently on the math path.
    if (mask->requires_grad() || mask->dim() > 4) return false;
    if (mask->scalar_type() != at::kBool && mask->scalar_type() != q.scalar_type()) return false;
  }
  return true;
}

int64_t choose_sdp_backend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                           const std::optional<at::Tensor>& attn_mask, double dropout_p, bool /*is_causal*/,
                           std::optional<double> /*scale*/, bool enable_gqa) {
  auto backend = takes_fused_path(query, key, value, attn_mask, dropout_p, enable_gqa) ? at::SDPBackend::overrideable
                                                                                       : at::SDPBackend::math;
  if (backend == at::SDPBackend::math && !at::globalContext().userEnabledMathSDP()) {
    TORCH_CHECK(false, "No viable backend for scaled_dot_product_attention on tpu: the math backend is disabled "
                       "and the fused one does not take this call (query ", query.sym_sizes(), ", key ", key.sym_sizes(),
                "), dropout_p=", dropout_p);
  }
  return static_cast<int64_t>(backend);
}

// The capacity of keys or values padded along their rows (dim 2): a padded prefix, or a view of
// one that repeats its heads (a single KV head expanded to the query's, viewed without a copy).
std::optional<int64_t> capacity_of_rows(const at::Tensor& t) {
  if (std::optional<int64_t> capacity = padded_capacity(t, 2)) return capacity;
  std::optional<Spare> s = spare_rows(t);
  if (s && s->dim == 2) return s->capacity;
  return std::nullopt;
}

// Keys and values with spare capacity (a growing KV cache, engine/growing): attention over the
// whole capacity with the rows past the length masked out, so the module depends on the
// capacity, not on the length. A mask must grow with them (generate()'s padded-batch mask, built
// over the capacity by engine/growing); nullopt for other tensors and masks.
std::optional<std::tuple<at::Tensor, at::Tensor, at::Tensor>> over_capacity(const at::Tensor& query,
                                                                             const at::Tensor& key,
                                                                             const at::Tensor& value,
                                                                             const std::optional<at::Tensor>& mask) {
  std::optional<int64_t> capacity = capacity_of_rows(key);
  if (!capacity || capacity_of_rows(value) != capacity) return std::nullopt;
  int64_t length = key.size(2);
  // arange(C) < length: the length is a runtime scalar of the comparison.
  at::Tensor valid = rows_below(*capacity, length, 3, 4, key);
  // The mask gives the spare keys' scores -inf, so their weights are exactly 0; but spare rows
  // hold anything (NaN from an op over a prompt's bucket): a NaN key's score plus an additive
  // mask's -inf is NaN, 0 * a NaN value is NaN in every true row, and so is the backward's
  // 0 * NaN key. The spare rows of both become zeros (one select each, only on the paths taken).
  auto zero_spare = [&](const at::Tensor& t) {
    return at::where(rows_below(*capacity, length, 2, 4, t), whole_capacity(t, 2, *capacity),
                     at::scalar_tensor(0, t.options()));
  };
  auto keys = [&] { return zero_spare(key); };
  auto values = [&] { return zero_spare(value); };
  if (!mask.has_value() || !mask->defined()) {
    return std::make_tuple(keys(), values(), valid);
  }
  auto with_valid_keys = [&](const at::Tensor& whole) {
    return mask->scalar_type() == at::kBool
               ? whole.logical_and(valid)
               : whole.masked_fill(valid.logical_not(), -std::numeric_limits<double>::infinity());
  };
  if (mask->dim() != 4) return std::nullopt;
  std::optional<Spare> grows = spare_rows(*mask);
  if (grows && grows->dim == 3 && grows->capacity == *capacity && grows->length == length) {
    return std::make_tuple(keys(), values(), with_valid_keys(whole_capacity(*mask, 3, *capacity)));
  }
  // A prompt's [L, L] mask (a sliding window, a padded batch) over queries of the same bucket:
  // the mask's query rows stay padded like the query's, so the call runs over the bucket.
  std::optional<Spare> square = square_rows(*mask);
  std::optional<Spare> queries = spare_rows(query);
  if (square && square->dim == 2 && square->dim2 == 3 && square->capacity == *capacity && square->length == length &&
      queries && queries->dim == 2 && queries->capacity == *capacity && queries->length == length) {
    at::Tensor rows = as_padded_prefix(with_valid_keys(whole_square(*mask, *square)), 2, length);
    return std::make_tuple(keys(), values(), rows);
  }
  // An exact mask over padded queries and keys of different lengths: an encoder-decoder's cross
  // attention in training (decoder rows in one bucket, encoder rows in another) has a mask made
  // from both, which no single bucket holds. It is copied into [.., Cq, Ck] (a copy that
  // compiles per pair of lengths), and the attention and every op after it run over the buckets.
  // Queries without spare rows (a decoder's token over the encoder's keys, under T5's exact
  // position bias) take the mask padded along the keys alone.
  const bool padded_queries = queries && queries->dim == 2 && queries->dim2 < 0;
  if (!grows && !square && (padded_queries || !queries) && mask->size(3) == length &&
      (mask->size(2) == query.size(2) || mask->size(2) == 1) && plain_tpu_tensor(*mask)) {
    const bool per_query = padded_queries && mask->size(2) == queries->length && queries->length > 1;
    std::vector<int64_t> sizes = mask->sizes().vec();
    sizes[3] = *capacity;
    if (per_query) sizes[2] = queries->capacity;
    at::Tensor whole = mask->scalar_type() == at::kBool
                           ? at::zeros(sizes, mask->options())
                           : at::full(sizes, -std::numeric_limits<double>::infinity(), mask->options());
    whole.narrow(3, 0, length).narrow(2, 0, mask->size(2)).copy_(*mask);
    at::Tensor masked = with_valid_keys(whole);
    return std::make_tuple(keys(), values(), per_query ? as_padded_prefix(masked, 2, queries->length) : masked);
  }
  return std::nullopt;
}

// The attention a fused-path call computes, over a growing KV cache's capacity where it has one:
// {output, logsumexp}, or {output, undefined} without logsumexp (a module libtpu rewrites into
// its flash kernel alone).
std::tuple<at::Tensor, at::Tensor> attend(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                                         std::optional<double> scale, bool with_logsumexp) {
  at::Tensor k = key, v = value;
  std::optional<at::Tensor> m = mask;
  // Fake and functional tensors (a trace through scaled_dot_product_attention below) have no
  // capacity to look at.
  const bool real = plain_tpu_tensor(query) && plain_tpu_tensor(key) && plain_tpu_tensor(value);
  if (auto padded = growing_dims_enabled() && real ? over_capacity(query, key, value, mask) : std::nullopt) {
    std::tie(k, v, m) = *padded;
  }
  if (with_logsumexp) return at::_scaled_dot_product_flash_attention_for_cpu(query, k, v, dropout_p, is_causal, m, scale);
  return {std::get<0>(at::_scaled_dot_product_efficient_attention(query, k, v, m, /*compute_log_sumexp=*/false,
                                                                  dropout_p, is_causal, scale)),
          at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
fused_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                bool /*return_debug_mask*/, std::optional<double> scale) {
  auto [out, logsumexp] = attend(query, key, value, attn_bias, dropout_p, is_causal, scale, /*with_logsumexp=*/true);
  auto rng_state = at::empty({}, query.options().dtype(at::kLong));
  return {out,       logsumexp, at::Tensor(), at::Tensor(), c10::SymInt(query.size(2)), c10::SymInt(key.size(2)),
          rng_state, rng_state, at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out,
    const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/, const at::Tensor& /*cum_seq_k*/,
    c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  TORCH_CHECK(!grad_input_mask[3], "scaled_dot_product_attention on tpu: no gradient for attn_mask on the fused path");
  std::optional<at::Tensor> mask;
  if (attn_bias.defined()) mask = attn_bias;
  // Over the capacity as the forward ran (a prompt's square mask, a grown cache): the gradients
  // of the keys and values are the first rows of the whole capacity's.
  const bool real = plain_tpu_tensor(query) && plain_tpu_tensor(key) && plain_tpu_tensor(value);
  if (auto padded = growing_dims_enabled() && real ? over_capacity(query, key, value, mask) : std::nullopt) {
    auto [k, v, m] = *padded;
    auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, query, k, v, out, logsumexp,
                                                                                dropout_p, is_causal, m, scale);
    const int64_t rows = key.size(2);
    return {dq, as_padded_prefix(dk, 2, rows), as_padded_prefix(dv, 2, rows), at::Tensor()};
  }
  auto [dq, dk, dv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      grad_out, query, key, value, out, logsumexp, dropout_p, is_causal, mask, scale);
  return {dq, dk, dv, at::Tensor()};
}

// A boolean mask made additive (0 / -inf in the query's dtype) as PyTorch's composite makes it for
// the overrideable backend, with where(mask, 0, -inf): a mask padded along both dims
// (engine/growing) stays so through where.
at::Tensor additive_mask(const at::Tensor& mask, const at::Tensor& query) {
  at::Tensor minus_inf =
      at::scalar_tensor(-std::numeric_limits<double>::infinity(), query.options().device(mask.device()));
  return at::where(mask, 0.0, minus_inf);
}

// scaled_dot_product_attention itself, where PyTorch would take the overrideable backend. Two
// things differ from PyTorch's composite, which runs every other call:
// - Without a gradient to record, it calls the attention without logsumexp (the composite's
//   fused op returns one, and libtpu computes it in a second pass over the scores).
// - Where modules are lowered for libtpu (on a TPU, and for the AOT check), a boolean mask reaches
//   the attention as it is: the composite would make it additive, and libtpu's flash-attention
//   pass never takes an additive mask (lowering/attention.cc, Target::Tpu). The two differ only
//   where a masked score is NaN or +inf: added to -inf it makes the row NaN (PyTorch), selected
//   away it does not (docs/limits.md).
// Registered at AutogradPrivateUse1 (the fused op records its own autograd node) and
// PrivateUse1 (inference mode, which skips autograd keys).
at::Tensor scaled_dot_product_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                                        const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                                        std::optional<double> scale, bool enable_gqa) {
  if (query.device().type() != c10::DeviceType::PrivateUse1 ||
      choose_sdp_backend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa) !=
          static_cast<int64_t>(at::SDPBackend::overrideable)) {
    return at::native::scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale,
                                                    enable_gqa);
  }
  // Asked only for a boolean mask: aot_check_enabled() takes a lock, and this runs per call.
  const bool boolean_mask = attn_mask.has_value() && attn_mask->defined() && attn_mask->scalar_type() == at::kBool;
  const bool keep_boolean =
      boolean_mask && (running_target() == lowering::Target::Tpu || aot_check_enabled());
  std::optional<at::Tensor> mask = boolean_mask && !keep_boolean ? additive_mask(*attn_mask, query) : attn_mask;
  const bool records_gradient =
      at::GradMode::is_enabled() && (query.requires_grad() || key.requires_grad() || value.requires_grad());
  if (records_gradient) {
    return std::get<0>(at::_scaled_dot_product_fused_attention_overrideable(query, key, value, mask, dropout_p,
                                                                           is_causal, false, scale));
  }
  return std::get<0>(attend(query, key, value, mask, dropout_p, is_causal, scale, /*with_logsumexp=*/false));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("scaled_dot_product_attention", scaled_dot_product_attention);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", fused_attention);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward);
  m.impl("scaled_dot_product_attention", scaled_dot_product_attention);
}

}  // namespace
}  // namespace tpu::engine

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &tpu::engine::choose_sdp_backend)
}  // namespace at::native
