// Graph-only rules of graphs compiled once per bucket (torch_tpu/compile/bucketed_graphs.py):
// forms whose true rows depend on a runtime length, which the graph carries as an input.
#include "hlo/ops.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// cat_at_length(tensors [a, x], dim, length, offset): cat(a, x) along `dim` where `a` is a padded
// prefix holding length + offset true rows. Over the capacity x would land after a's spare rows;
// it is written right after the true ones instead (a runtime offset), so the result is again a
// padded prefix with x's rows more: a KV cache's append in a decode step.
std::vector<Value> cat_at_length(Context& c) {
  Builder& b = c.b;
  const Arg& list = c.arg(0);
  if (list.tensors.size() != 2) throw NotLowerable("cat_at_length: expected two tensors");
  DType dtype = c.out().dtype;
  Value a = convert(b, list.tensors[0], dtype), x = convert(b, list.tensors[1], dtype);
  int64_t dim = wrap_dim(c.int_arg(1), a.rank());
  Value joined = concatenate(b, {a, x}, dim);
  Value start = add(b, convert(b, c.tensor(2), DType::S64), constant(b, static_cast<double>(c.int_arg(3)), DType::S64));
  std::vector<Value> starts;
  for (int64_t d = 0; d < a.rank(); ++d) starts.push_back(d == dim ? start : constant(b, 0, DType::S64));
  return {dynamic_update_slice(b, joined, x, starts)};
}

// slice_at_length(x, dim, length, offset, rows): `rows` rows of x along `dim` from
// length + offset on (x[..., -n:] of a padded prefix with length + offset + n true rows...
// the offset already counts the -n), reshaped to the result's type (a select drops the dim).
std::vector<Value> slice_at_length(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  int64_t dim = wrap_dim(c.int_arg(1), x.rank());
  Value start = add(b, convert(b, c.tensor(2), DType::S64), constant(b, static_cast<double>(c.int_arg(3)), DType::S64));
  std::vector<Value> starts;
  std::vector<int64_t> sizes = x.shape();
  sizes[dim] = c.int_arg(4);
  for (int64_t d = 0; d < x.rank(); ++d) starts.push_back(d == dim ? start : constant(b, 0, DType::S64));
  return {reshape(b, dynamic_slice(b, x, starts, sizes), c.out().shape)};
}

const GraphRegistrar registrar({{"cat_at_length", cat_at_length}, {"slice_at_length", slice_at_length}});

}  // namespace
}  // namespace tpu::lowering
