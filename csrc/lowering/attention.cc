// Dense attention in one module: softmax(q k^T * scale + mask) v and its backward, the fused path
// scaled_dot_product_attention takes on tpu (engine/composite/fused_attention.cc picks it and
// calls these rules through the ATen ops that carry the same math on the CPU).
//
// Numerics follow PyTorch's CPU flash kernel rather than its math path: bf16/f16 operands go
// into the matmuls as they are, with f32 accumulation; scores, max, exponentials and sums are
// f32; the unnormalised probabilities are rounded to the operand type for the product with v,
// and the sum divides afterwards. (The math path upcasts q, k and v to f32 and materialises f32
// scores: about 4x the time and memory of this on a TPU, docs/diffusers.md.) Rows with nothing
// left after masking give 0, as the math path's _safe_softmax does; their logsumexp is +inf so
// the backward's exp(s - lse) is 0 there.
//
// Grouped-query attention: q may have G times the heads of k and v (G >= 1); q's heads are
// viewed as [Hkv, G] and each group attends to its shared k/v head, which is what enable_gqa's
// repeat_interleave of k and v means, without materialising the repeats.
#include <cmath>
#include <limits>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Dims {
  int64_t B, Hkv, G, Lq, Lk, E, Ev;
};

Dims attention_dims(const std::string& op, Value q, Value k, Value v) {
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) {
    throw NotLowerable(op + ": query, key and value must be 4-D");
  }
  const auto &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  if (ks[0] != qs[0] || vs[0] != qs[0] || vs[1] != ks[1] || vs[2] != ks[2] || ks[3] != qs[3]) {
    throw InvalidCall(op + ": query " + shape_str(qs) + ", key " + shape_str(ks) + " and value " + shape_str(vs) +
                      " do not describe one attention");
  }
  if (ks[1] == 0 || qs[1] % ks[1] != 0) {
    throw InvalidCall(op + ": query heads (" + std::to_string(qs[1]) + ") must be a multiple of key/value heads (" +
                      std::to_string(ks[1]) + ")");
  }
  if (vs[3] != qs[3]) throw NotLowerable(op + ": value head dim differs from query's");
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype() || !is_float(q.dtype())) {
    throw NotLowerable(op + ": query, key and value of different or non-float dtypes");
  }
  return {qs[0], ks[1], qs[1] / ks[1], qs[2], ks[2], qs[3], vs[3]};
}

// [B, Hkv*G, L, X] <-> [B, Hkv, G, L, X] when G > 1. Without grouping the arrays stay 4-D: a unit
// G dim made XLA:CPU copy the whole score matrix to fix that dim's place in the layout (fused
// attention ran 1.5x slower there than the same math as bmm), and libtpu's estimates are equal.
Value grouped(Builder& b, Value x, const Dims& d) {
  return d.G == 1 ? x : reshape(b, x, {d.B, d.Hkv, d.G, x.shape()[2], x.shape()[3]});
}
Value ungrouped(Builder& b, Value x) {
  const auto& s = x.shape();
  return s.size() == 4 ? x : reshape(b, x, {s[0], s[1] * s[2], s[3], s[4]});
}
// The dims of a grouped q-side array that index its rows: {G, Lq}, or {Lq} without grouping; the
// column (E, Ev or Lk) is the next one.
std::vector<int64_t> row_dims(const Dims& d) { return d.G == 1 ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3}; }
int64_t col_dim(const Dims& d) { return row_dims(d).back() + 1; }

// Scores [B, Hkv, G, Lq, Lk] (or [B, H, Lq, Lk]) in `acc`: q k^T * scale, plus the additive (float) or keep (bool)
// mask, with -inf above the diagonal when causal (top-left aligned, as the math path's tril).
//
// With `scale_later`, the result is left unscaled where that is exact: no additive mask (it adds
// to scaled scores) and scale > 0 (max(x * s) == max(x) * s then, as rounding is monotonic, and
// -inf stays -inf). The caller then scales inside its exponential, so no pass over the whole
// score matrix does only the multiply (XLA:CPU ran one before the row max); *scaled tells which.
Value scores(Context& c, const std::string& op, Value q, Value k, const Dims& d, size_t mask_arg, bool causal,
             double scale, DType acc, bool scale_later = false, bool* scaled = nullptr) {
  Builder& b = c.b;
  Value s = dot_general(b, grouped(b, q, d), k, {0, 1}, {0, 1}, {col_dim(d)}, {3}, acc);
  const bool additive_mask = c.has(mask_arg) && c.tensor(mask_arg).dtype() != DType::Pred;
  const bool scale_now = !(scale_later && scale > 0 && !additive_mask);
  if (scale_now) s = mul(b, s, constant(b, scale, acc, s.shape()));
  if (scaled != nullptr) *scaled = scale_now;
  const std::vector<int64_t> full = {d.B, d.Hkv * d.G, d.Lq, d.Lk};
  if (c.has(mask_arg)) {
    Value mask = c.tensor(mask_arg);
    if (!broadcastable(mask.shape(), full)) {
      throw InvalidCall(op + ": attn_mask of shape " + shape_str(mask.shape()) + " does not broadcast to " +
                        shape_str(full));
    }
    mask = grouped(b, broadcast_to(b, mask, full), d);
    if (mask.dtype() == DType::Pred) {
      s = select(b, mask, s, constant(b, -kInf, acc, s.shape()));
    } else {
      s = add(b, s, convert(b, mask, acc));
    }
  }
  if (causal) {
    Type index(DType::S64, s.shape());
    Value above = compare(b, iota(b, index, col_dim(d)), iota(b, index, col_dim(d) - 1), "GT");
    s = select(b, above, constant(b, -kInf, acc, s.shape()), s);
  }
  return s;
}

double softmax_scale(Context& c, size_t arg, const Dims& d) {
  return c.has(arg) ? c.double_arg(arg) : 1.0 / std::sqrt(static_cast<double>(d.E));
}

// The operand type of a product with probabilities: the inputs' own type (bf16/f16 as the CPU
// flash kernel rounds them), f32/f64 otherwise.
Value low(Builder& b, Value x, DType input) { return convert(b, x, input); }

Value keep_dims(Builder& b, Value r, const std::vector<int64_t>& shape) {
  std::vector<int64_t> dims;
  for (int64_t i = 0; i + 1 < static_cast<int64_t>(shape.size()); ++i) dims.push_back(i);
  return broadcast_in_dim(b, r, shape, dims);
}

void require_no_dropout(Context& c, const std::string& op, size_t arg) {
  if (c.double_arg(arg) != 0.0) throw NotLowerable(op + " with dropout");
}

// _scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, *,
// attn_mask, scale) -> (output, logsumexp)
std::vector<Value> attention_forward(Context& c) {
  const std::string op = "_scaled_dot_product_flash_attention_for_cpu";
  Builder& b = c.b;
  Value q = c.tensor(0), k = c.tensor(1), v = c.tensor(2);
  Dims d = attention_dims(op, q, k, v);
  require_no_dropout(c, op, 3);
  DType in = q.dtype(), acc = float_opmath(in);
  const double scale = softmax_scale(c, 6, d);
  bool scaled = true;
  Value s = scores(c, op, q, k, d, 5, c.bool_arg(4), scale, acc, /*scale_later=*/true, &scaled);
  const int64_t col = col_dim(d);
  Value m = reduce(b, s, {col}, "max");  // [B, Hkv, G, Lq]
  if (!scaled) {
    m = mul(b, m, constant(b, scale, acc, m.shape()));
    s = mul(b, s, constant(b, scale, acc, s.shape()));  // fuses into the exponential below
  }
  Value dead = compare(b, m, constant(b, -kInf, acc, m.shape()), "EQ");
  Value m_safe = select(b, dead, zeros(b, m.type), m);
  Value p = unary(b, "stablehlo.exponential", sub(b, s, keep_dims(b, m_safe, s.shape())));
  Value l = reduce(b, p, {col}, "add");
  Value o = dot_general(b, low(b, p, in), v, {0, 1}, {0, 1}, {col}, {2}, acc);  // [B, Hkv, G, Lq, Ev]
  o = div(b, o, keep_dims(b, l, o.shape()));
  o = select(b, keep_dims(b, dead, o.shape()), zeros(b, o.type), o);
  Value lse = add(b, m_safe, unary(b, "stablehlo.log", l));
  lse = select(b, dead, constant(b, kInf, acc, lse.shape()), lse);
  lse = reshape(b, lse, {d.B, d.Hkv * d.G, d.Lq});
  return {convert(b, ungrouped(b, o), c.out(0).dtype), convert(b, lse, c.out(1).dtype)};
}

// _scaled_dot_product_flash_attention_for_cpu_backward(grad_out, query, key, value, out,
// logsumexp, dropout_p, is_causal, *, attn_mask, scale) -> (grad_query, grad_key, grad_value)
std::vector<Value> attention_backward(Context& c) {
  const std::string op = "_scaled_dot_product_flash_attention_for_cpu_backward";
  Builder& b = c.b;
  Value dout = c.tensor(0), q = c.tensor(1), k = c.tensor(2), v = c.tensor(3), out = c.tensor(4);
  Value lse = c.tensor(5);
  Dims d = attention_dims(op, q, k, v);
  require_no_dropout(c, op, 6);
  DType in = q.dtype(), acc = float_opmath(in);
  double scale = softmax_scale(c, 9, d);
  Value s = scores(c, op, q, k, d, 8, c.bool_arg(7), scale, acc);
  const int64_t col = col_dim(d);
  const std::vector<int64_t> rows = row_dims(d);
  Value lse_g = reshape(b, convert(b, lse, acc), d.G == 1 ? std::vector<int64_t>{d.B, d.Hkv, d.Lq}
                                                           : std::vector<int64_t>{d.B, d.Hkv, d.G, d.Lq});
  Value p = unary(b, "stablehlo.exponential", sub(b, s, keep_dims(b, lse_g, s.shape())));
  Value dout_g = grouped(b, convert(b, dout, in), d);
  // dV = P^T dO, summed over the G query heads sharing each k/v head.
  Value dv = dot_general(b, low(b, p, in), dout_g, {0, 1}, {0, 1}, rows, rows, acc);
  Value dp = dot_general(b, dout_g, v, {0, 1}, {0, 1}, {col}, {3}, acc);
  Value rowdot = reduce(b, mul(b, convert(b, dout_g, acc), convert(b, grouped(b, out, d), acc)), {col}, "add");
  Value ds = mul(b, p, sub(b, dp, keep_dims(b, rowdot, dp.shape())));
  Value ds_low = low(b, ds, in);
  Value scale_v = constant(b, scale, acc);
  Value dq = dot_general(b, ds_low, k, {0, 1}, {0, 1}, {col}, {2}, acc);  // [B, Hkv, G, Lq, E]
  dq = mul(b, dq, broadcast_to(b, scale_v, dq.shape()));
  Value dk = dot_general(b, ds_low, grouped(b, q, d), {0, 1}, {0, 1}, rows, rows, acc);  // [B, Hkv, Lk, E]
  dk = mul(b, dk, broadcast_to(b, scale_v, dk.shape()));
  return {convert(b, ungrouped(b, dq), c.out(0).dtype), convert(b, dk, c.out(1).dtype),
          convert(b, dv, c.out(2).dtype)};
}

Registrar registrar({
    {"_scaled_dot_product_flash_attention_for_cpu", attention_forward},
    {"_scaled_dot_product_flash_attention_for_cpu_backward", attention_backward},
});

}  // namespace
}  // namespace tpu::lowering
