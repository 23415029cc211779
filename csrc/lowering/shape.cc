// Shape-building ops that copy data: cat, stack, flip, roll, repeat, tril/triu, constant_pad_nd.
//
// Views (_unsafe_view, view, narrow, split, unbind...) never reach rules, and clone/contiguous
// are handled by copy_fill.cc (contiguous is CompositeImplicitAutograd -> clone).
#include <numeric>

#include "lowering/float8_rules.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// cat(Tensor[] tensors, int dim=0). Legacy rule: 1-D tensors of shape [0] are skipped.
std::vector<Value> cat(Context& c) {
  const Type& out = c.out();
  const auto& list = c.arg(0).tensors;
  refuse_float8_promotion(list);
  int64_t dim = wrap_dim(c.int_arg(1), out.rank());
  std::vector<Value> parts;
  for (const Value& v : list) {
    if (v.rank() == 1 && v.shape()[0] == 0 && out.rank() != 1) continue;
    if (v.rank() != out.rank()) {
      throw std::invalid_argument("Tensors must have same number of dimensions: got " +
                                  std::to_string(out.rank()) + " and " + std::to_string(v.rank()));
    }
    int64_t n = 1;
    for (int64_t s : v.shape()) n *= s;
    if (n == 0) continue;  // contributes nothing
    parts.push_back(convert(c.b, v, out.dtype));
  }
  if (parts.empty()) return {zeros(c.b, out)};
  return {concatenate(c.b, parts, dim)};
}

// stack(Tensor[] tensors, int dim=0): cat of unsqueezed inputs.
std::vector<Value> stack(Context& c) {
  const Type& out = c.out();
  const auto& list = c.arg(0).tensors;
  refuse_float8_promotion(list);
  int64_t dim = wrap_dim(c.int_arg(1), out.rank());
  std::vector<Value> parts;
  for (const Value& v : list) {
    std::vector<int64_t> shape = v.shape();
    shape.insert(shape.begin() + dim, 1);
    parts.push_back(reshape(c.b, convert(c.b, v, out.dtype), shape));
  }
  if (parts.empty()) throw std::invalid_argument("stack expects a non-empty TensorList");
  return {concatenate(c.b, parts, dim)};
}

std::vector<Value> flip(Context& c) {
  Value x = c.tensor(0);
  std::vector<int64_t> dims = wrap_dims(c.ints(1), x.rank());
  for (size_t i = 1; i < dims.size(); ++i) {
    if (dims[i] == dims[i - 1]) throw std::invalid_argument("dims has duplicates");
  }
  if (x.rank() == 0) return {x};
  return {reverse(c.b, x, dims)};
}

// Roll along one dimension: out[i] = x[(i - shift) mod n].
Value roll_dim(Builder& b, Value x, int64_t shift, int64_t dim) {
  int64_t n = x.shape()[dim];
  if (n == 0) return x;
  shift = ((shift % n) + n) % n;
  if (shift == 0) return x;
  std::vector<int64_t> start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
  std::vector<int64_t> s1 = start, l1 = limit, s2 = start, l2 = limit;
  s1[dim] = n - shift;
  l2[dim] = n - shift;
  return concatenate(b, {slice(b, x, s1, l1, strides), slice(b, x, s2, l2, strides)}, dim);
}

std::vector<Value> roll(Context& c) {
  Value x = c.tensor(0);
  const auto& shifts = c.ints(1);
  std::vector<int64_t> dims = c.has(2) ? c.ints(2) : std::vector<int64_t>{};
  if (dims.empty()) {
    if (shifts.size() != 1) throw std::invalid_argument("shifts and dimensions must align");
    int64_t n = 1;
    for (int64_t s : x.shape()) n *= s;
    Value flat = reshape(c.b, x, {n});
    return {reshape(c.b, roll_dim(c.b, flat, shifts[0], 0), x.shape())};
  }
  if (shifts.size() != dims.size()) {
    throw std::invalid_argument("shifts and dimensions must align. shifts: " +
                                std::to_string(shifts.size()) + ", dims:" + std::to_string(dims.size()));
  }
  for (size_t i = 0; i < dims.size(); ++i) x = roll_dim(c.b, x, shifts[i], wrap_dim(dims[i], x.rank()));
  return {x};
}

// repeat(self, repeats): broadcast to [r0, s0, r1, s1, ...] then merge the pairs.
std::vector<Value> repeat(Context& c) {
  Value x = c.tensor(0);
  const auto& reps = c.ints(1);
  if (reps.size() < static_cast<size_t>(x.rank())) {
    throw std::invalid_argument(
        "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  }
  std::vector<int64_t> padded(reps.size() - x.rank(), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  x = reshape(c.b, x, padded);
  std::vector<int64_t> wide, dims, merged;
  for (size_t i = 0; i < reps.size(); ++i) {
    wide.push_back(reps[i]);
    wide.push_back(padded[i]);
    dims.push_back(static_cast<int64_t>(2 * i + 1));
    merged.push_back(reps[i] * padded[i]);
  }
  Value w = broadcast_in_dim(c.b, x, wide, dims);
  return {reshape(c.b, w, merged)};
}

// tril/triu(self, diagonal): keep elements with col - row <= diagonal (tril) / >= (triu).
Rule triangle(bool lower) {
  return [lower](Context& c) {
    Value x = c.tensor(0);
    if (x.rank() < 2) throw std::invalid_argument(std::string(lower ? "tril" : "triu") +
                                                  ": input tensor must have at least 2 dimensions");
    int64_t diagonal = c.has(1) ? c.int_arg(1) : 0;
    Type it(DType::S64, x.shape());
    Value diff = sub(c.b, iota(c.b, it, x.rank() - 1), iota(c.b, it, x.rank() - 2));
    Value keep = compare(c.b, diff, constant(c.b, static_cast<double>(diagonal), DType::S64, x.shape()),
                         lower ? Direction::LE : Direction::GE);
    return std::vector<Value>{select(c.b, keep, x, zeros(c.b, x.type))};
  };
}

// constant_pad_nd(self, pad, value=0): pad pairs apply from the last dimension backwards;
// negative pads remove elements (StableHLO pad accepts negative edge padding).
std::vector<Value> constant_pad_nd(Context& c) {
  Value x = c.tensor(0);
  const auto& pad_list = c.ints(1);
  if (pad_list.size() % 2 != 0) throw std::invalid_argument("Length of pad must be even but instead it equals " + std::to_string(pad_list.size()));
  if (pad_list.size() / 2 > static_cast<size_t>(x.rank())) {
    throw std::invalid_argument("Length of pad should be no more than twice the number of dimensions of the input.");
  }
  std::vector<int64_t> low(x.rank(), 0), high(x.rank(), 0), interior(x.rank(), 0);
  for (size_t i = 0; i < pad_list.size() / 2; ++i) {
    int64_t d = x.rank() - 1 - static_cast<int64_t>(i);
    low[d] = pad_list[2 * i];
    high[d] = pad_list[2 * i + 1];
    if (x.shape()[d] + low[d] + high[d] < 0) {
      throw std::invalid_argument("The input size " + std::to_string(x.shape()[d]) + ", plus negative padding " +
                                  std::to_string(low[d]) + " and " + std::to_string(high[d]) +
                                  " resulted in a negative output size");
    }
  }
  DType t = c.out().dtype;
  Value value = c.has(2) ? convert(c.b, c.tensor(2), t) : constant(c.b, 0, t);
  return {pad(c.b, convert(c.b, x, t), value, low, high, interior)};
}

const Registrar registrar({
    {"cat", cat},
    {"stack", stack},
    {"flip", flip},
    {"roll", roll},
    {"repeat", repeat},
    {"tril", triangle(true)},
    {"triu", triangle(false)},
    {"constant_pad_nd", constant_pad_nd},
});

// cat: padded operands keep their spare rows in the result's capacity.
const PaddedOperandsRegistrar padded_operands({
    {"cat", PaddedOperands::Exact},
    {"stack", PaddedOperands::Exact},
});

}  // namespace
}  // namespace tpu::lowering
