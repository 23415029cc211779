// Dense attention in one module: softmax(q k^T * scale + mask) v and its backward, the fused path
// scaled_dot_product_attention takes on tpu (engine/composite/fused_attention.cc picks it and
// calls these rules through the ATen ops that carry the same math on the CPU).
//
// Without a mask the forward takes the form libtpu's flash-attention pass rewrites into its
// kernel (unmasked_attention_forward). With a mask, numerics follow PyTorch's CPU flash kernel
// rather than its math path: bf16/f16 operands go into the matmuls as they are, with f32
// accumulation; scores, max, exponentials and sums are f32; the unnormalised probabilities are
// rounded to the operand type for the product with v, and the sum divides afterwards. (The math
// path upcasts q, k and v to f32 and materialises f32 scores: about 4x the time and memory of
// this on a TPU, docs/diffusers.md.) Rows with nothing
// left after masking give 0, as the math path's _safe_softmax does; their logsumexp is +inf so
// the backward's exp(s - lse) is 0 there.
//
// Grouped-query attention: q may have G times the heads of k and v (G >= 1); q's heads are
// viewed as [Hkv, G] and each group attends to its shared k/v head, which is what enable_gqa's
// repeat_interleave of k and v means, without materialising the repeats.
#include <cmath>
#include <limits>
#include <optional>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"
#include "lowering/target.h"

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

// libtpu's flash-attention pass takes a grouped q of rank 4 at most: for [B, Hkv, G, L, E] with
// B > 1 its rewrite log says "unsupported rank for q: 5" and the module stays unchanged. With
// G > 1 the flash forms therefore fold the batch into the kv heads: [B, H, L, X] is
// [1, B*H, L, X] (a free reshape; q head h of batch b is row b*H + h, its kv head row
// b*Hkv + h/G), the B = 1 form libtpu takes once it drops the unit dim.
bool folds_batch(const Dims& d) { return d.G > 1 && d.B > 1; }
Dims batch_in_heads(const Dims& d) {
  Dims f = d;
  if (folds_batch(d)) {
    f.B = 1;
    f.Hkv = d.B * d.Hkv;
  }
  return f;
}
Value heads_of_all_batches(Builder& b, Value x, const Dims& d) {
  if (!folds_batch(d)) return x;
  const auto& s = x.shape();
  return reshape(b, x, {1, s[0] * s[1], s[2], s[3]});
}
// The forms' results back in the user's batches: {output [B, H, Lq, Ev], logsumexp [B, H, Lq]}.
std::vector<Value> batches_of(Builder& b, std::vector<Value> r, const Dims& d) {
  if (!folds_batch(d)) return r;
  const auto& o = r[0].shape();
  r[0] = reshape(b, r[0], {d.B, d.Hkv * d.G, o[2], o[3]});
  r[1] = reshape(b, r[1], {d.B, d.Hkv * d.G, d.Lq});
  return r;
}

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
    Value above = compare(b, iota(b, index, col_dim(d)), iota(b, index, col_dim(d) - 1), Direction::GT);
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

// The sequence lengths libtpu's flash-attention kernel takes: a multiple of 128 up to 512, a
// multiple of 512 beyond (its blocks; other lengths keep the module unchanged, "padding not
// supported"). Longer sequences are padded up to one when that adds at most an eighth
// (Qwen-Image's 4160 tokens -> 4608, SD3's 4429 -> 4608); short ones are left as they are,
// where padding would multiply the work on the CPU plugin.
int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
int64_t flash_length(int64_t n) {
  const int64_t padded = n <= 512 ? round_up(n, 128) : round_up(n, 512);
  return n > 512 && (padded - n) * 8 <= n ? padded : n;
}

// Attention without a mask, in the form libtpu's flash-attention pass rewrites into its kernel
// (docs/tpu_aot.md, "Flash attention"): the scale multiplies q before the product, the
// probabilities are normalised before they are rounded for the product with v, and nothing
// else reads the scores. The pass keeps a module unchanged for any other form (the scale on
// the scores, a division after the second product, a guard on the row max), and then a TPU
// writes and reads the whole f32 score matrix through HBM. The one difference from the masked
// form: a row whose every score is -inf (only infinite inputs make one without a mask) gives
// NaN, where PyTorch's CPU kernels give 0 (docs/limits.md).
//
// Padded keys (flash_length) are copies of key 0, so no padded score exceeds a real one, and v
// gains a column of ones on the real keys (0 on the padded ones) and zeros up to the next 128:
// that column of the output is the real keys' share of each row's softmax, which the output
// divides by, exactly (the share is at least 1 / (1 + padded keys)). Padded query rows are
// sliced off.
std::vector<Value> unmasked_attention_forward(Context& c, Value q, Value k, Value v, const Dims& d, double scale) {
  Builder& b = c.b;
  DType in = q.dtype(), acc = float_opmath(in);
  const int64_t Lq = flash_length(d.Lq), Lk = flash_length(d.Lk);
  const bool pad_queries = Lq != d.Lq, pad_keys = Lk != d.Lk;
  Value q_scaled = mul(b, q, constant(b, scale, in, q.shape()));
  // The padded arrays are written with dynamic_update_slice into a filled one: libtpu turns a
  // pad or concatenate along the sequence into a ConcatBitcast call its cost analysis does not
  // model (the module then has no estimate).
  const std::vector<Value> origin(4, constant(b, 0.0, DType::S32));
  if (pad_queries) {
    q_scaled = dynamic_update_slice(b, constant(b, 0.0, in, {d.B, d.Hkv * d.G, Lq, d.E}), q_scaled, origin);
  }
  Dims pd = d;
  pd.Lq = Lq;
  pd.Lk = Lk;
  if (pad_keys) {
    Value first_key = slice(b, k, {0, 0, 0, 0}, {d.B, d.Hkv, 1, d.E}, {1, 1, 1, 1});
    k = dynamic_update_slice(b, broadcast_to(b, first_key, {d.B, d.Hkv, Lk, d.E}), k, origin);
    Type index(DType::S32, {d.B, d.Hkv, Lk, d.Ev + 128});
    Value share_column = binary(b, Binary::And, compare(b, iota(b, index, 3), constant(b, d.Ev, DType::S32, index.shape), Direction::EQ),
                                compare(b, iota(b, index, 2), constant(b, d.Lk, DType::S32, index.shape), Direction::LT));
    Value filled = select(b, share_column, constant(b, 1.0, in, index.shape), constant(b, 0.0, in, index.shape));
    v = dynamic_update_slice(b, filled, v, origin);
  }
  Value s = dot_general(b, grouped(b, q_scaled, pd), k, {0, 1}, {0, 1}, {col_dim(pd)}, {3}, acc);
  const int64_t col = col_dim(pd);
  Value m = reduce(b, s, {col}, "max");
  Value e = unary(b, Unary::Exponential, sub(b, s, keep_dims(b, m, s.shape())));
  Value l = reduce(b, e, {col}, "add");
  Value p = div(b, e, keep_dims(b, l, e.shape()));
  Value o = dot_general(b, low(b, p, in), v, {0, 1}, {0, 1}, {col}, {2}, acc);  // [B, Hkv, G, Lq, Ev(+128)]
  // Read only by the backward: a graph without one drops it, and the kernel stays alone.
  Value lse = add(b, m, unary(b, Unary::Log, l));
  std::vector<int64_t> start(o.rank(), 0), limit = o.shape(), step(o.rank(), 1);
  limit[o.rank() - 2] = d.Lq;
  if (pad_queries) {
    std::vector<int64_t> lse_limit = lse.shape();
    lse_limit.back() = d.Lq;
    lse = slice(b, lse, std::vector<int64_t>(lse.rank(), 0), lse_limit, std::vector<int64_t>(lse.rank(), 1));
  }
  if (pad_keys) {
    std::vector<int64_t> share_start = start, share_limit = limit;
    share_start.back() = d.Ev;
    share_limit.back() = d.Ev + 1;
    Value share = reshape(b, slice(b, o, share_start, share_limit, step), lse.shape());
    limit.back() = d.Ev;
    o = div(b, slice(b, o, start, limit, step), keep_dims(b, share, limit));
    lse = add(b, lse, unary(b, Unary::Log, share));
  } else if (pad_queries) {
    o = slice(b, o, start, limit, step);
  }
  lse = reshape(b, lse, {d.B, d.Hkv * d.G, d.Lq});
  return {convert(b, ungrouped(b, o), c.out(0).dtype), lse};
}

// Whether libtpu's kernel takes these lengths once flash_length pads them: a multiple of 128 up
// to 512, a multiple of 512 beyond.
bool kernel_length(int64_t n) { return n % 128 == 0 && (n <= 512 || n % 512 == 0); }

// Whether a mask has one row for every query (its query dim is 1 or absent).
bool mask_rows_are_one(const Value& mask) { return mask.rank() < 2 || mask.shape()[mask.rank() - 2] == 1; }

// Masked or causal attention for libtpu (Target::Tpu): the pass takes a mask only after a
// soft-cap, `select(keep, tanh(s / c) * c, finfo.min)` over the f32 scores of q * scale times k
// (docs/tpu_aot.md). With c = 2^64 the cap is exact scaling by powers of two and tanh(x) = x in
// f32 for |x| < 2^-11, so every |score| below 2^53 is kept as it is: the module is plain masked
// attention. The false value is finite because the kernel subtracts each 512-block's own row
// max, and -inf there gives -inf - -inf = NaN in a wholly masked block. Differences from the
// exact form (Target::Exact), which this target accepts for the kernel: an infinite score is
// capped to +-2^64 (the exact form gives NaN rows for +inf), and a row a boolean mask leaves
// empty is set to 0 after the kernel (it would be the mean of v), as PyTorch's _safe_softmax
// does. Lengths are padded as for the unmasked form, the padded keys masked out.
// `user` holds the call's dims (the mask is checked and shaped against them); q, k and v come
// with the batch folded into the heads where batch_in_heads folds it (their dims: `d`).
std::vector<Value> capped_masked_attention_forward(Context& c, const std::string& op, Value q, Value k, Value v,
                                                   const Dims& user, double scale, size_t mask_arg, bool causal) {
  Builder& b = c.b;
  const Dims d = batch_in_heads(user);
  DType in = q.dtype(), acc = float_opmath(in);
  const int64_t Lq = flash_length(d.Lq), Lk = flash_length(d.Lk);
  const std::vector<Value> origin(4, constant(b, 0.0, DType::S32));
  Value q_scaled = mul(b, q, constant(b, scale, in, q.shape()));
  if (Lq != d.Lq) q_scaled = dynamic_update_slice(b, constant(b, 0.0, in, {d.B, d.Hkv * d.G, Lq, d.E}), q_scaled, origin);
  if (Lk != d.Lk) {
    k = dynamic_update_slice(b, constant(b, 0.0, in, {d.B, d.Hkv, Lk, d.E}), k, origin);
    v = dynamic_update_slice(b, constant(b, 0.0, in, {d.B, d.Hkv, Lk, d.Ev}), v, origin);
  }
  Dims pd = d;
  pd.Lq = Lq;
  pd.Lk = Lk;
  Value s = dot_general(b, grouped(b, q_scaled, pd), k, {0, 1}, {0, 1}, {col_dim(pd)}, {3}, acc);
  const int64_t col = col_dim(pd);
  // The keep mask over the padded scores: the user's boolean mask (false where padded), causal
  // (top-left), and the real keys. What does not depend on the batch or head is built as
  // [Lq, Lk] and broadcast: the kernel reads the mask per block as it is given, and a causal mask
  // made over the whole score shape becomes an s32 array per head (twice the estimate).
  const std::vector<int64_t> square = {Lq, Lk};
  std::optional<Value> keep2d, keep;
  auto both = [&](std::optional<Value>& into, Value x) { into = into ? binary(b, Binary::And, *into, x) : x; };
  Type index(DType::S32, square);
  if (causal) both(keep2d, compare(b, iota(b, index, 0), iota(b, index, 1), Direction::GE));
  if (Lk != d.Lk) both(keep2d, compare(b, iota(b, index, 1), constant(b, d.Lk, DType::S32, square), Direction::LT));
  const bool user_mask = c.has(mask_arg);
  if (user_mask) {
    const std::vector<int64_t> full = {user.B, user.Hkv * user.G, user.Lq, user.Lk};
    Value mask = c.tensor(mask_arg);
    if (!broadcastable(mask.shape(), full)) {
      throw InvalidCall(op + ": attn_mask of shape " + shape_str(mask.shape()) + " does not broadcast to " +
                        shape_str(full));
    }
    int64_t leading = 0;  // unit dims before the mask's last two
    while (leading + 2 < mask.rank() && mask.shape()[leading] == 1) ++leading;
    const bool per_position = mask.rank() - leading <= 2;
    // A mask that varies by batch only ([B, 1, Lq or 1, Lk], a left-padded batch) stays
    // [B, Lq, Lk] and is broadcast over the heads: made over every head it is an s32 array per
    // head that the kernel reads per block.
    const bool per_batch = !per_position && mask.rank() == 4 && mask.shape()[1] == 1;
    std::vector<int64_t> target = full;
    if (per_position) {
      target = {d.Lq, d.Lk};
      mask = reshape(b, mask, std::vector<int64_t>(mask.shape().begin() + leading, mask.shape().end()));
    } else if (per_batch) {
      target = {mask.shape()[0], d.Lq, d.Lk};
      mask = reshape(b, mask, {mask.shape()[0], mask.shape()[2], mask.shape()[3]});
    }
    mask = broadcast_to(b, mask, target);
    if (Lq != d.Lq || Lk != d.Lk) {
      std::vector<int64_t> padded = target;
      padded[padded.size() - 2] = Lq;
      padded.back() = Lk;
      mask = dynamic_update_slice(b, constant(b, 0.0, DType::Pred, padded), mask,
                                  std::vector<Value>(padded.size(), origin[0]));
    }
    // A key-padding mask ([..., 1, Lk]) alone reaches the pass as a broadcast of its [Lk] row (or
    // [B, Lk] rows), which it refuses ("unsupported mask condition shape: pred[Lk]"); joined with
    // a test true at every position it is a [Lq, Lk] array, which it takes. The test compares
    // the two index iotas (query + Lk > key), as libtpu folds an iota compared with a constant.
    if (!keep2d && mask_rows_are_one(c.tensor(mask_arg))) {
      Value query_plus_keys = add(b, iota(b, index, 0), constant(b, Lk, DType::S32, square));
      both(keep2d, compare(b, query_plus_keys, iota(b, index, 1), Direction::GT));
    }
    if (per_position) {
      both(keep2d, mask);
    } else if (per_batch) {
      if (keep2d) mask = binary(b, Binary::And, mask, broadcast_in_dim(b, *keep2d, mask.shape(), {1, 2}));
      keep2d.reset();
      const int64_t rank = static_cast<int64_t>(s.shape().size());
      if (folds_batch(user)) {  // [B, Lq, Lk] over the user's [B, Hkv, G, Lq, Lk], then folded
        keep = reshape(b, broadcast_in_dim(b, mask, {user.B, user.Hkv, user.G, Lq, Lk}, {0, 3, 4}), s.shape());
      } else {
        keep = broadcast_in_dim(b, mask, s.shape(), {0, rank - 2, rank - 1});
      }
    } else {
      both(keep, grouped(b, mask, pd));
    }
  }
  if (keep2d) {
    const int64_t rank = static_cast<int64_t>(s.shape().size());
    both(keep, broadcast_in_dim(b, *keep2d, s.shape(), {rank - 2, rank - 1}));
  }
  Value cap = constant(b, std::ldexp(1.0, 64), acc, s.shape());
  Value capped = mul(b, unary(b, Unary::Tanh, div(b, s, cap)), cap);
  s = select(b, *keep, capped, constant(b, std::numeric_limits<float>::lowest(), acc, s.shape()));
  Value m = reduce(b, s, {col}, "max");
  Value e = unary(b, Unary::Exponential, sub(b, s, keep_dims(b, m, s.shape())));
  Value l = reduce(b, e, {col}, "add");
  Value p = div(b, e, keep_dims(b, l, e.shape()));
  Value o = dot_general(b, low(b, p, in), v, {0, 1}, {0, 1}, {col}, {2}, acc);  // [B, Hkv, G, Lq, Ev]
  Value lse = add(b, m, unary(b, Unary::Log, l));
  if (user_mask) {  // rows the mask leaves empty: 0, and logsumexp +inf (the backward's exp(s - lse) = 0)
    Value alive = reduce(b, *keep, {col}, "or");
    o = select(b, keep_dims(b, alive, o.shape()), o, zeros(b, o.type));
    lse = select(b, alive, lse, constant(b, kInf, acc, lse.shape()));
  }
  if (Lq != d.Lq) {
    std::vector<int64_t> limit = o.shape();
    limit[o.rank() - 2] = d.Lq;
    o = slice(b, o, std::vector<int64_t>(o.rank(), 0), limit, std::vector<int64_t>(o.rank(), 1));
    std::vector<int64_t> lse_limit = lse.shape();
    lse_limit.back() = d.Lq;
    lse = slice(b, lse, std::vector<int64_t>(lse.rank(), 0), lse_limit, std::vector<int64_t>(lse.rank(), 1));
  }
  lse = reshape(b, lse, {d.B, d.Hkv * d.G, d.Lq});
  return {convert(b, ungrouped(b, o), c.out(0).dtype), lse};
}

// Whether libtpu's masked form applies: a boolean mask or causal, no additive mask (the pass never
// takes a bias), float32 scores, and lengths the kernel takes. Asks the target last, so only
// modules that could differ are lowered twice.
bool lower_masked_for_tpu(Context& c, const Dims& d, DType in, size_t mask_arg) {
  if (c.has(mask_arg) && c.tensor(mask_arg).dtype() != DType::Pred) return false;
  if (float_opmath(in) != DType::F32 || !kernel_length(flash_length(d.Lq)) || !kernel_length(flash_length(d.Lk))) {
    return false;
  }
  return lowering_target() == Target::Tpu;
}

// Where a forward op keeps its arguments after query, key and value.
struct ForwardArgs {
  size_t mask, dropout, causal, scale;
};

// The forward of both ops: {output in the result dtype, logsumexp [B, H, Lq] in f32/f64}.
std::vector<Value> forward(Context& c, const std::string& op, const ForwardArgs& a) {
  Builder& b = c.b;
  Value q = c.tensor(0), k = c.tensor(1), v = c.tensor(2);
  Dims d = attention_dims(op, q, k, v);
  require_no_dropout(c, op, a.dropout);
  DType in = q.dtype(), acc = float_opmath(in);
  const double scale = softmax_scale(c, a.scale, d);
  const bool causal = c.bool_arg(a.causal);
  const bool flash_unmasked = !c.has(a.mask) && !causal;
  if (flash_unmasked || lower_masked_for_tpu(c, d, in, a.mask)) {
    const Dims folded = batch_in_heads(d);
    Value fq = heads_of_all_batches(b, q, d), fk = heads_of_all_batches(b, k, d), fv = heads_of_all_batches(b, v, d);
    return batches_of(b,
                      flash_unmasked ? unmasked_attention_forward(c, fq, fk, fv, folded, scale)
                                     : capped_masked_attention_forward(c, op, fq, fk, fv, d, scale, a.mask, causal),
                      d);
  }
  bool scaled = true;
  Value s = scores(c, op, q, k, d, a.mask, causal, scale, acc, /*scale_later=*/true, &scaled);
  const int64_t col = col_dim(d);
  Value m = reduce(b, s, {col}, "max");  // [B, Hkv, G, Lq]
  if (!scaled) {
    m = mul(b, m, constant(b, scale, acc, m.shape()));
    s = mul(b, s, constant(b, scale, acc, s.shape()));  // fuses into the exponential below
  }
  Value max_is_minus_inf = compare(b, m, constant(b, -kInf, acc, m.shape()), Direction::EQ);
  Value m_safe = select(b, max_is_minus_inf, zeros(b, m.type), m);
  Value p = unary(b, Unary::Exponential, sub(b, s, keep_dims(b, m_safe, s.shape())));
  Value l = reduce(b, p, {col}, "add");
  // A row is dead when masking left nothing. The max can also be -inf for a row of NaN and
  // masked scores (stablehlo.maximum on XLA:CPU drops a NaN); its sum is NaN, and the row is NaN
  // as on the CPU, not 0.
  Value dead = binary(b, Binary::And, max_is_minus_inf, compare(b, l, l, Direction::EQ));
  Value o = dot_general(b, low(b, p, in), v, {0, 1}, {0, 1}, {col}, {2}, acc);  // [B, Hkv, G, Lq, Ev]
  o = div(b, o, keep_dims(b, l, o.shape()));
  o = select(b, keep_dims(b, dead, o.shape()), zeros(b, o.type), o);
  Value lse = add(b, m_safe, unary(b, Unary::Log, l));
  lse = select(b, dead, constant(b, kInf, acc, lse.shape()), lse);
  lse = reshape(b, lse, {d.B, d.Hkv * d.G, d.Lq});
  return {convert(b, ungrouped(b, o), c.out(0).dtype), lse};
}

// _scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, *,
// attn_mask, scale) -> (output, logsumexp)
std::vector<Value> attention_forward(Context& c) {
  std::vector<Value> r = forward(c, "_scaled_dot_product_flash_attention_for_cpu", {5, 3, 4, 6});
  return {r[0], convert(c.b, r[1], c.out(1).dtype)};
}

// _scaled_dot_product_efficient_attention(query, key, value, attn_bias, compute_log_sumexp,
// dropout_p, is_causal, *, scale) -> (output, log_sumexp, philox_seed, philox_offset)
//
// The same attention; its logsumexp is optional. scaled_dot_product_attention takes it on tpu
// when no gradient is recorded (engine/composite/fused_attention.cc): a module without
// logsumexp is one libtpu rewrites into its flash kernel alone, where returning logsumexp costs a
// second pass over the scores (docs/tpu_aot.md). With compute_log_sumexp the logsumexp is padded
// to a multiple of 32 rows, as the meta kernel says (CUDA's kernel's blocks); the rows past the
// queries are +inf, as a row with nothing to attend to. The RNG outputs are 0 (no dropout).
std::vector<Value> efficient_attention_forward(Context& c) {
  Builder& b = c.b;
  std::vector<Value> r = forward(c, "_scaled_dot_product_efficient_attention", {3, 5, 6, 7});
  const Type& lse_type = c.out(1);
  Value lse;
  if (c.bool_arg(4)) {
    Value filled = constant(b, kInf, lse_type.dtype, lse_type.shape);
    lse = dynamic_update_slice(b, filled, convert(b, r[1], lse_type.dtype),
                               std::vector<Value>(3, constant(b, 0.0, DType::S32)));
  } else {
    lse = constant(b, 0.0, lse_type.dtype, lse_type.shape);  // [B, H, 0]
  }
  return {r[0], lse, zeros(b, c.out(2)), zeros(b, c.out(3))};
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
  Value p = unary(b, Unary::Exponential, sub(b, s, keep_dims(b, lse_g, s.shape())));
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
    {"_scaled_dot_product_efficient_attention", efficient_attention_forward},
});

// Attention over padded keys: the padder masks the scores' softmax. The backward's products
// contract over the padded keys (dQ) and queries (dK, dV), which the padder masks too.
const PaddedOperandsRegistrar padded_operands({
    {"_scaled_dot_product_flash_attention_for_cpu", PaddedOperands::Exact},
    {"_scaled_dot_product_flash_attention_for_cpu_backward", PaddedOperands::Exact},
    {"_scaled_dot_product_efficient_attention", PaddedOperands::Exact},
});

}  // namespace
}  // namespace tpu::lowering
