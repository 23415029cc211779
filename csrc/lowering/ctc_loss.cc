// CTC loss: _ctc_loss (forward: per-sample negative log likelihood and the log-alpha table) and
// _ctc_loss_backward, the recursions of Graves et al. (2006) as PyTorch's CPU kernel computes
// them, each as one stablehlo.while over time for the whole batch.
//
// The input and target lengths are int[] arguments, so they are compile-time constants here: the
// padded (B, S) and the concatenated (sum of lengths) target forms both become a (B, L) table of
// extended labels (blank, t0, blank, t1, ..., blank), L = 2 * max target length + 1. Samples
// shorter than the batch's longest keep their last state (forward) or stay -inf (backward).
// log_alpha entries past a sample's lengths are left undefined by the CPU kernel; ours hold the
// carried values, and only the valid entries are read by the backward.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

const double kNegInf = -std::numeric_limits<double>::infinity();

struct Ctc {
  int64_t T = 0, B = 0, C = 0, L = 1, max_target = 0;
  std::vector<int64_t> input_lengths, target_lengths;
  DType t = DType::F32;
  Value ext;   // S64 (B, L): extended labels
  Value skip;  // pred (B, L): s may come from s - 2 (a label differing from the one two back)
  Value lpe;   // (T, B, L): log_probs at each extended label
};

Value s64_vector(Builder& b, const std::vector<int64_t>& v) { return constant_i64_vector(b, v, DType::S64); }

Value neg_inf(Builder& b, DType t, const std::vector<int64_t>& shape) { return constant(b, kNegInf, t, shape); }

// Per-sample constant (B) broadcast to (B, L).
Value per_sample(Builder& b, const std::vector<int64_t>& v, int64_t L) {
  return broadcast_in_dim(b, s64_vector(b, v), {static_cast<int64_t>(v.size()), L}, {0});
}

// (B, max_target) S64 targets from the padded (B, >= S) or concatenated form.
Value padded_targets(Builder& b, Value targets, const Ctc& c) {
  Value tg = convert(b, targets, DType::S64);
  if (targets.rank() == 2) return slice(b, tg, {0, 0}, {c.B, c.max_target}, {1, 1});
  std::vector<int64_t> index;
  int64_t offset = 0;
  for (int64_t i = 0; i < c.B; ++i) {
    for (int64_t k = 0; k < c.max_target; ++k) index.push_back(offset + std::min(k, std::max<int64_t>(c.target_lengths[i] - 1, 0)));
    offset += c.target_lengths[i];
  }
  if (targets.shape()[0] == 0) return constant(b, 0, DType::S64, {c.B, c.max_target});
  GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 2;
  Value idx = reshape(b, s64_vector(b, index), {c.B, c.max_target, 1});
  return gather(b, tg, idx, d, {1}, {c.B, c.max_target});
}

// (b, ext[b, s]) coordinates, (B, L, 2): where each extended label reads and writes its class.
Value class_index(Builder& b, const Ctc& c) {
  Value batch = iota(b, Type(DType::S64, {c.B, c.L, 1}), 0);
  return concatenate(b, {batch, reshape(b, c.ext, {c.B, c.L, 1})}, 2);
}

// Arguments (log_probs, targets, input_lengths, target_lengths) at positions 0..3 from `first`;
// the blank index is given.
Ctc prepare(Context& cx, size_t first, int64_t blank) {
  Builder& b = cx.b;
  Ctc c;
  Value lp = cx.tensor(first), targets = cx.tensor(first + 1);
  if (lp.rank() != 3) throw InvalidCall("Expected 3-dimensional tensor, but got " + std::to_string(lp.rank()) +
                                        "-dimensional tensor for argument #1 'log_probs'");
  require_dtype(lp.dtype() == DType::F32 || lp.dtype() == DType::F64, "ctc_loss_cpu", lp.dtype());
  c.T = lp.shape()[0];
  c.B = lp.shape()[1];
  c.C = lp.shape()[2];
  c.t = lp.dtype();
  if (blank < 0 || blank >= c.C) throw InvalidCall("blank must be in label range");
  c.input_lengths = cx.ints(first + 2);
  c.target_lengths = cx.ints(first + 3);
  if (static_cast<int64_t>(c.input_lengths.size()) != c.B) throw InvalidCall("input_lengths must be of size batch_size");
  if (static_cast<int64_t>(c.target_lengths.size()) != c.B) throw InvalidCall("target_lengths must be of size batch_size");
  for (int64_t i = 0; i < c.B; ++i) {
    if (c.target_lengths[i] < 0 || c.input_lengths[i] < 0 || c.input_lengths[i] > c.T) {
      throw InvalidCall("ctc_loss: input or target length out of range");
    }
    c.max_target = std::max(c.max_target, c.target_lengths[i]);
  }
  if (targets.rank() == 2 && targets.shape()[1] < c.max_target) {
    throw InvalidCall("Expected tensor to have size at least " + std::to_string(c.max_target) +
                      " at dimension 1, but got size " + std::to_string(targets.shape()[1]) + " for argument #2 'targets'");
  }
  c.L = 2 * c.max_target + 1;
  Value blanks = constant(b, static_cast<double>(blank), DType::S64, {c.B, c.max_target, 1});
  if (c.max_target > 0) {
    Value tg = reshape(b, padded_targets(b, targets, c), {c.B, c.max_target, 1});
    Value pairs = reshape(b, concatenate(b, {blanks, tg}, 2), {c.B, 2 * c.max_target});
    c.ext = concatenate(b, {pairs, constant(b, static_cast<double>(blank), DType::S64, {c.B, 1})}, 1);
  } else {
    c.ext = constant(b, static_cast<double>(blank), DType::S64, {c.B, 1});
  }
  Value two_back = concatenate(b, {constant(b, -1, DType::S64, {c.B, std::min<int64_t>(2, c.L)}),
                                   slice(b, c.ext, {0, 0}, {c.B, std::max<int64_t>(c.L - 2, 0)}, {1, 1})},
                               1);
  if (c.L < 2) two_back = constant(b, -1, DType::S64, {c.B, c.L});
  c.skip = compare(b, c.ext, two_back, Direction::NE);
  Value s = iota(b, Type(DType::S64, {c.B, c.L}), 1);
  c.skip = binary(b, Binary::And, c.skip, compare(b, s, constant(b, 2, DType::S64, {c.B, c.L}), Direction::GE));
  // lpe[t, b, s] = lp[t, b, ext[b, s]]: a gather of (b, class) rows of lp as (B, C, T).
  GatherDims d;
  d.offset_dims = {2};
  d.collapsed_slice_dims = {0, 1};
  d.start_index_map = {0, 1};
  d.index_vector_dim = 2;
  Value rows = gather(b, transpose(b, lp, {1, 2, 0}), class_index(b, c), d, {1, 1, c.T}, {c.B, c.L, c.T});
  c.lpe = transpose(b, rows, {2, 0, 1});
  return c;
}

// log(exp(a) + exp(b) + exp(c)) the CPU's way: shifted by the largest, 0 when all are -inf.
Value log_add3(Builder& b, Value x, Value y, Value z) {
  Value m = max(b, max(b, x, y), z);
  m = select(b, compare(b, m, neg_inf(b, m.dtype(), m.shape()), Direction::EQ), zeros(b, m.type), m);
  auto e = [&](Value v) { return unary(b, Unary::Exponential, sub(b, v, m)); };
  return add(b, unary(b, Unary::Log, add(b, add(b, e(x), e(y)), e(z))), m);
}

// x shifted along s by `by` (positive: towards higher s), -inf filling the gap.
Value shift(Builder& b, Value x, int64_t by) {
  int64_t B = x.shape()[0], L = x.shape()[1];
  if (std::abs(by) >= L) return neg_inf(b, x.dtype(), x.shape());
  Value fill = neg_inf(b, x.dtype(), {B, std::abs(by)});
  if (by > 0) return concatenate(b, {fill, slice(b, x, {0, 0}, {B, L - by}, {1, 1})}, 1);
  return concatenate(b, {slice(b, x, {0, -by}, {B, L}, {1, 1}), fill}, 1);
}

Value row_at(Builder& b, Value lpe, Value t, const Ctc& c) {  // lpe[t] as (B, L)
  Value zero = constant(b, 0, DType::S64);
  return reshape(b, dynamic_slice(b, lpe, {t, zero, zero}, {1, c.B, c.L}), {c.B, c.L});
}

// _ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)
//   -> (neg_log_likelihood (B), log_alpha (B, T, L))
std::vector<Value> ctc_forward(Context& cx) {
  Builder& b = cx.b;
  Ctc c = prepare(cx, 0, cx.int_arg(4));
  DType t = c.t;
  std::vector<int64_t> bl{c.B, c.L};
  Value s = iota(b, Type(DType::S64, bl), 1);
  Value table = neg_inf(b, t, {c.B, c.T, c.L});
  Value alpha = neg_inf(b, t, bl);
  if (c.T > 0) {
    Value lp0 = row_at(b, c.lpe, constant(b, 0, DType::S64), c);
    Value first_two = binary(b, Binary::Or, compare(b, s, constant(b, 0, DType::S64, bl), Direction::EQ),
                             binary(b, Binary::And, compare(b, s, constant(b, 1, DType::S64, bl), Direction::EQ),
                                    compare(b, per_sample(b, c.target_lengths, c.L), constant(b, 0, DType::S64, bl), Direction::GT)));
    alpha = select(b, first_two, lp0, alpha);
    table = dynamic_update_slice(b, table, reshape(b, alpha, {c.B, 1, c.L}),
                                 {constant(b, 0, DType::S64), constant(b, 0, DType::S64), constant(b, 0, DType::S64)});
    std::vector<Type> state{Type(DType::S64, {}), alpha.type, table.type, c.lpe.type, c.skip.type};
    std::string cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
      return std::vector<Value>{compare(r, v[0], constant(r, static_cast<double>(c.T), DType::S64), Direction::LT)};
    });
    std::string body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
      Value step = v[0], prev = v[1];
      Value a3 = select(r, v[4], shift(r, prev, 2), neg_inf(r, t, bl));
      Value next = add(r, log_add3(r, prev, shift(r, prev, 1), a3), row_at(r, v[3], step, c));
      Value active = compare(r, broadcast_in_dim(r, step, bl, {}), per_sample(r, c.input_lengths, c.L), Direction::LT);
      Value kept = select(r, active, next, prev);
      Value zero = constant(r, 0, DType::S64);
      Value tab = dynamic_update_slice(r, v[2], reshape(r, kept, {c.B, 1, c.L}), {zero, step, zero});
      return std::vector<Value>{add(r, step, constant(r, 1, DType::S64)), kept, tab, v[3], v[4]};
    });
    std::vector<Value> out = b.emit("stablehlo.while", {constant(b, 1, DType::S64), alpha, table, c.lpe, c.skip},
                                    state, "", {cond, body});
    alpha = out[1];
    table = out[2];
  }
  // The likelihood from the last step's final blank and final label.
  std::vector<int64_t> last(c.B), before_last(c.B);
  std::vector<int64_t> no_input(c.B), empty_target(c.B);
  for (int64_t i = 0; i < c.B; ++i) {
    last[i] = 2 * c.target_lengths[i];
    before_last[i] = std::max<int64_t>(2 * c.target_lengths[i] - 1, 0);
    no_input[i] = c.input_lengths[i] == 0;
    empty_target[i] = c.target_lengths[i] == 0;
  }
  auto pick = [&](const std::vector<int64_t>& at) {
    Value hit = compare(b, s, per_sample(b, at, c.L), Direction::EQ);
    return reduce(b, select(b, hit, alpha, neg_inf(b, t, bl)), {1}, "max");
  };
  Value l1 = pick(last), l2 = pick(before_last);
  Value ninf = neg_inf(b, t, {c.B});
  Value has_label = compare(b, s64_vector(b, empty_target), constant(b, 0, DType::S64, {c.B}), Direction::EQ);
  l2 = select(b, has_label, l2, ninf);
  Value m = max(b, l1, l2);
  m = select(b, compare(b, m, ninf, Direction::EQ), zeros(b, m.type), m);
  auto e = [&](Value v) { return unary(b, Unary::Exponential, sub(b, v, m)); };
  Value ll = add(b, unary(b, Unary::Log, add(b, e(l1), e(l2))), m);
  // No input steps: likelihood 1 for an empty target, else 0.
  Value none = compare(b, s64_vector(b, no_input), constant(b, 0, DType::S64, {c.B}), Direction::NE);
  ll = select(b, none, select(b, has_label, ninf, zeros(b, ll.type)), ll);
  return {convert(b, neg(b, ll), cx.out(0).dtype), convert(b, table, cx.out(1).dtype)};
}

// _ctc_loss_backward(grad, log_probs, targets, input_lengths, target_lengths, neg_log_likelihood,
// log_alpha, blank, zero_infinity) -> grad of log_probs (T, B, C)
std::vector<Value> ctc_backward(Context& cx) {
  Builder& b = cx.b;
  Ctc c = prepare(cx, 1, cx.int_arg(7));
  DType t = c.t;
  bool zero_infinity = cx.bool_arg(8);
  const Type& out = cx.out();
  if (c.T == 0 || c.B == 0 || c.C == 0) return {zeros(b, out)};
  std::vector<int64_t> bl{c.B, c.L};
  std::vector<int64_t> last(c.B), last_label(c.B), final_step(c.B);
  for (int64_t i = 0; i < c.B; ++i) {
    last[i] = 2 * c.target_lengths[i];
    last_label[i] = c.target_lengths[i] > 0 ? 2 * c.target_lengths[i] - 1 : -1;
    final_step[i] = c.input_lengths[i] - 1;
  }
  // beta, from each sample's last step down to 0, for all samples at once.
  std::vector<Type> state{Type(DType::S64, {}), Type(t, bl), Type(t, {c.B, c.T, c.L}), c.lpe.type, c.ext.type};
  std::string cond = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    return std::vector<Value>{compare(r, v[0], constant(r, 0, DType::S64), Direction::GE)};
  });
  std::string body = b.region(state, [&](Builder& r, const std::vector<Value>& v) {
    Value step = v[0], next_beta = v[1], ext = v[4];
    Value s = iota(r, Type(DType::S64, bl), 1);
    Value lpe_t = row_at(r, v[3], step, c);
    Value ninf = neg_inf(r, t, bl);
    Value last_s = per_sample(r, last, c.L);
    Value valid = compare(r, s, last_s, Direction::LE);
    Value b2 = select(r, compare(r, s, last_s, Direction::LT), shift(r, next_beta, -1), ninf);
    Value ext2 = concatenate(r, {slice(r, ext, {0, std::min<int64_t>(2, c.L)}, {c.B, c.L}, {1, 1}),
                                 constant(r, -1, DType::S64, {c.B, std::min<int64_t>(2, c.L)})},
                             1);
    Value skip = binary(r, Binary::And, compare(r, s, sub(r, last_s, constant(r, 1, DType::S64, bl)), Direction::LT),
                        compare(r, ext2, ext, Direction::NE));
    Value b3 = select(r, skip, shift(r, next_beta, -2), ninf);
    Value rec = add(r, log_add3(r, next_beta, b2, b3), lpe_t);
    Value start = binary(r, Binary::Or, compare(r, s, last_s, Direction::EQ),
                         compare(r, s, per_sample(r, last_label, c.L), Direction::EQ));
    Value init = select(r, start, lpe_t, ninf);
    Value step_b = broadcast_in_dim(r, step, bl, {});
    Value final_b = per_sample(r, final_step, c.L);
    Value beta = select(r, compare(r, step_b, final_b, Direction::EQ), init,
                        select(r, compare(r, step_b, final_b, Direction::LT), rec, ninf));
    beta = select(r, valid, beta, ninf);
    Value zero = constant(r, 0, DType::S64);
    Value tab = dynamic_update_slice(r, v[2], reshape(r, beta, {c.B, 1, c.L}), {zero, step, zero});
    return std::vector<Value>{sub(r, step, constant(r, 1, DType::S64)), beta, tab, v[3], v[4]};
  });
  std::vector<Value> loop = b.emit("stablehlo.while",
                                   {constant(b, static_cast<double>(c.T - 1), DType::S64), neg_inf(b, t, bl),
                                    neg_inf(b, t, {c.B, c.T, c.L}), c.lpe, c.ext},
                                   state, "", {cond, body});
  Value log_beta = loop[2];
  Value alpha = convert(b, cx.tensor(6), t);
  Value ab = add(b, alpha, log_beta);  // (B, T, L)
  // Per class: log of the sum over the extended labels that are this class, shifted by the
  // (b, t) maximum and scatter-added into (B, C, T). (A class far below the maximum underflows to
  // -inf where the CPU's pairwise log-add keeps a tiny value; its gradient term is as tiny.)
  Value m = reduce(b, ab, {2}, "max");  // (B, T)
  m = select(b, compare(b, m, neg_inf(b, t, m.shape()), Direction::EQ), zeros(b, m.type), m);
  Value shifted = unary(b, Unary::Exponential, sub(b, ab, broadcast_in_dim(b, m, {c.B, c.T, c.L}, {0, 1})));
  ScatterDims sd;
  sd.update_window_dims = {2};
  sd.inserted_window_dims = {0, 1};
  sd.scatter_dims_to_operand_dims = {0, 1};
  sd.index_vector_dim = 2;
  Value sums = scatter(b, zeros(b, Type(t, {c.B, c.C, c.T})), class_index(b, c), transpose(b, shifted, {0, 2, 1}), sd, "add");
  Value lcab = add(b, unary(b, Unary::Log, transpose(b, sums, {0, 2, 1})),
                   broadcast_in_dim(b, m, {c.B, c.T, c.C}, {0, 1}));  // (B, T, C)
  // grad = (exp(lp) - exp(lcab + nll - lp)) * grad_out, for t < input_length.
  Value lp = transpose(b, convert(b, cx.tensor(1), t), {1, 0, 2});  // (B, T, C)
  std::vector<int64_t> btc{c.B, c.T, c.C};
  Value nll = broadcast_in_dim(b, convert(b, cx.tensor(5), t), btc, {0});
  Value g = broadcast_in_dim(b, convert(b, cx.tensor(0), t), btc, {0});
  Value res = mul(b, sub(b, unary(b, Unary::Exponential, lp),
                         unary(b, Unary::Exponential, sub(b, add(b, lcab, nll), lp))),
                  g);
  Value in_time = compare(b, iota(b, Type(DType::S64, btc), 1),
                          broadcast_in_dim(b, s64_vector(b, c.input_lengths), btc, {0}), Direction::LT);
  res = select(b, in_time, res, zeros(b, res.type));
  if (zero_infinity) {
    Value infinite = compare(b, nll, constant(b, std::numeric_limits<double>::infinity(), t, btc), Direction::EQ);
    res = select(b, infinite, zeros(b, res.type), res);
  }
  return {convert(b, transpose(b, res, {1, 0, 2}), out.dtype)};
}

const Registrar registrar({
    {"_ctc_loss", ctc_forward},
    {"_ctc_loss_backward", ctc_backward},
});

}  // namespace
}  // namespace tpu::lowering
