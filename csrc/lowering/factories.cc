// Non-random factories: arange, linspace, eye (out= overloads), and the factories graphs see
// (graph-only rules, registry.h): eager mode runs PyTorch's own kernels for full, zeros, empty,
// arange(...) (an empty storage, then fill_ / arange.out); a graph computes their values.
#include <cstdint>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// arange.start_out(start, end, step, out), arange.out(end, out), and in graphs arange(end),
// arange.start(start, end), arange.start_step(start, end, step): value = start + i * step.
std::vector<Value> arange(Context& c, bool has_start, bool has_step) {
  Builder& b = c.b;
  const Type& out = c.out();
  int64_t n = out.shape.at(0);
  Value start = has_start ? c.tensor(0) : constant(b, 0, DType::S64);
  Value step = has_step ? c.tensor(2) : constant(b, 1, DType::S64);
  // An integer result counts in int64 from start and step truncated to integers, as the CPU's
  // kernel (accscalar_t of an integer type): arange(1, 4, 1.904) into int64 is [1, 2, 3].
  DType acc = is_integer(out.dtype) ? DType::S64 : float_opmath(out.dtype);
  Value i = iota(b, Type(acc, {n}), 0);
  Value r = add(b, broadcast_in_dim(b, convert(b, start, acc), {n}, {}),
                mul(b, i, broadcast_in_dim(b, convert(b, step, acc), {n}, {})));
  return {convert(b, r, out.dtype)};
}

// linspace.out(start, end, steps, out)
std::vector<Value> linspace(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  int64_t n = out.shape.at(0);
  // A complex result counts in its own type: a complex end point keeps its imaginary part.
  DType acc = is_complex(out.dtype) ? out.dtype : float_opmath(out.dtype);
  if (n == 0) return {zeros(b, out)};
  // An integer result takes start and end in its own type first (2.5 -> 2), like the CPU kernel.
  auto endpoint = [&](size_t i) {
    Value v = is_integer(out.dtype) ? convert(b, c.tensor(i), out.dtype) : c.tensor(i);
    return broadcast_in_dim(b, convert(b, v, acc), {n}, {});
  };
  Value start = endpoint(0), end = endpoint(1);
  if (n == 1) return {convert(b, start, out.dtype)};
  Value step = div(b, sub(b, end, start), constant(b, static_cast<double>(n - 1), acc, {n}));
  DType index_type = is_complex(acc) ? real_part(acc) : acc;
  Value index = iota(b, Type(index_type, {n}), 0);
  Value i = convert(b, index, acc);
  Value lo = add(b, start, mul(b, i, step));
  Value hi = sub(b, end, mul(b, sub(b, constant(b, static_cast<double>(n - 1), acc, {n}), i), step));
  Value first_half = compare(b, index, constant(b, static_cast<double>(n / 2), index_type, {n}), Direction::LT);
  return {convert(b, select(b, first_half, lo, hi), out.dtype)};
}

// eye.out(n, out) / eye.m_out(n, m, out)
std::vector<Value> eye(Context& c) {
  Builder& b = c.b;
  const Type& out = c.out();
  Value r = iota(b, Type(DType::S64, out.shape), 0), col = iota(b, Type(DType::S64, out.shape), 1);
  return {convert(b, compare(b, r, col, Direction::EQ), out.dtype)};
}

// empty* has no defined contents; zeros keep graphs deterministic.
std::vector<Value> zeros_out(Context& c) { return {zeros(c.b, c.out())}; }
std::vector<Value> ones_out(Context& c) { return {constant(c.b, 1, c.out().dtype, c.out().shape)}; }

// full(size, fill_value), full_like(self, fill_value), new_full(self, size, fill_value),
// scalar_tensor(s): the fill value is argument `i`, a 0-d value.
Value filled(Context& c, size_t i) { return cast_to(c.b, c.tensor(i), c.out().dtype, c.out().shape); }

const Registrar registrar({
    {"arange.start_out", [](Context& c) { return arange(c, true, true); }},
    {"arange.out", [](Context& c) { return arange(c, false, false); }},
    {"linspace.out", linspace},
    {"eye.out", eye},
    {"eye.m_out", eye},
});

const GraphRegistrar graph_registrar({
    {"empty.memory_format", zeros_out},
    {"empty_strided", zeros_out},
    {"empty_like", zeros_out},
    {"new_empty", zeros_out},
    {"new_empty_strided", zeros_out},
    {"zeros", zeros_out},
    {"zeros_like", zeros_out},
    {"new_zeros", zeros_out},
    {"ones", ones_out},
    {"ones_like", ones_out},
    {"new_ones", ones_out},
    {"full", [](Context& c) { return std::vector<Value>{filled(c, 1)}; }},
    {"full_like", [](Context& c) { return std::vector<Value>{filled(c, 1)}; }},
    {"new_full", [](Context& c) { return std::vector<Value>{filled(c, 2)}; }},
    {"scalar_tensor", [](Context& c) { return std::vector<Value>{filled(c, 0)}; }},
    {"arange", [](Context& c) { return arange(c, false, false); }},
    {"arange.start", [](Context& c) { return arange(c, true, false); }},
    {"arange.start_step", [](Context& c) { return arange(c, true, true); }},
});

}  // namespace
}  // namespace tpu::lowering
