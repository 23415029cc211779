// More reductions: count_nonzero (dim list or optional dim) and aminmax.
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Wrapped, sorted, distinct dims; empty means every dim.
std::vector<int64_t> dims_or_all(const std::vector<int64_t>& given, int64_t rank) {
  std::vector<int64_t> dims;
  if (given.empty()) {
    dims.resize(rank);
    std::iota(dims.begin(), dims.end(), 0);
    return dims;
  }
  if (rank == 0) {
    for (int64_t d : given) wrap_dim(d, 0);
    return {};
  }
  dims = wrap_dims(given, rank);
  for (size_t k = 1; k < dims.size(); ++k) {
    if (dims[k] == dims[k - 1]) {
      throw std::runtime_error("dim " + std::to_string(dims[k]) + " appears multiple times in the list of dims");
    }
  }
  return dims;
}

Value nonzero_mask(Builder& b, Value x) {
  if (is_complex(x.dtype())) {
    Type rt(real_part(x.dtype()), x.shape());
    Value re = real(b, x), im = imag(b, x);
    return binary(b, Binary::Or, compare(b, re, zeros(b, rt), Direction::NE), compare(b, im, zeros(b, rt), Direction::NE));
  }
  return convert(b, x, DType::Pred);  // != 0 (NaN counts)
}

// count_nonzero.dim_IntList(self, dim[]) / count_nonzero(self, dim?)
std::vector<Value> count_nonzero(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  std::vector<int64_t> given;
  if (c.has(1)) {
    const Arg& a = c.arg(1);
    if (a.kind == Arg::Kind::Int) given = {a.i};
    else given = a.ints;
  }
  std::vector<int64_t> dims = dims_or_all(given, x.rank());
  Value m = convert(b, nonzero_mask(b, x), DType::S64);
  return {reshape(b, convert(b, reduce(b, m, dims, "add"), c.out().dtype), c.out().shape)};
}

// aminmax(self, *, dim=None, keepdim=False) -> (min, max), NaN propagating.
std::vector<Value> aminmax(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  std::vector<int64_t> dims;
  if (c.has(1)) {
    if (x.rank() > 0) dims = {wrap_dim(c.int_arg(1), x.rank())};
    else wrap_dim(c.int_arg(1), 0);
  } else {
    dims.resize(x.rank());
    std::iota(dims.begin(), dims.end(), 0);
  }
  for (int64_t d : dims) {
    if (x.shape()[d] == 0 && !c.has(1)) {
      throw std::runtime_error("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                               "identity.");
    }
    if (x.shape()[d] == 0) {
      throw std::out_of_range("aminmax(): Expected reduction dim " + std::to_string(d) +
                              " to have non-zero size.");
    }
  }
  std::vector<Value> results;
  Value any_nan;
  if (is_float(x.dtype()) && !dims.empty()) any_nan = reduce(b, compare(b, x, x, Direction::NE), dims, "or");
  for (const char* kind : {"min", "max"}) {
    Value r = reduce(b, x, dims, kind);
    if (any_nan.valid()) r = select(b, any_nan, scalar_like(b, std::nan(""), r), r);
    results.push_back(reshape(b, convert(b, r, c.out(results.size()).dtype), c.out(results.size()).shape));
  }
  return results;
}

const Registrar registrar({
    {"count_nonzero.dim_IntList", count_nonzero},
    {"count_nonzero", count_nonzero},
    {"aminmax", aminmax},
});

}  // namespace
}  // namespace tpu::lowering
