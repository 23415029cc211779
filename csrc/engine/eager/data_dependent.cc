// Ops whose output shape depends on the data: one host sync to learn the size, then lowered
// ops with that static size (nonzero = count + nonzero_static). Documented in docs/limits.md.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

namespace tpu::engine {
namespace {

int64_t count_nonzero_on_host(const at::Tensor& self) {
  return (self != 0).sum().item<int64_t>();  // the host sync
}

at::Tensor nonzero_kernel(const at::Tensor& self) {
  return at::nonzero_static(self, count_nonzero_on_host(self), -1);
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  at::Tensor result = nonzero_kernel(self);
  out.resize_(result.sizes());
  out.copy_(result);
  return out;
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask, got ",
              mask.scalar_type());
  auto expanded = at::expand_outplace(self, mask);
  at::Tensor values = std::get<0>(expanded)->reshape(-1);
  at::Tensor flat_mask = std::get<1>(expanded)->reshape(-1);
  at::Tensor positions = at::nonzero_static(flat_mask, count_nonzero_on_host(flat_mask), -1);
  return values.index_select(0, positions.reshape(-1));
}

// unique via a stable sort: boundaries between runs of equal values give the distinct values,
// their counts and every element's position among them.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool, bool return_inverse,
                                                       bool return_counts) {
  at::Tensor flat = self.reshape(-1);
  int64_t n = flat.numel();
  if (n == 0) {
    return {flat.clone(), at::zeros(self.sizes(), self.options().dtype(at::kLong)),
            at::zeros({0}, self.options().dtype(at::kLong))};
  }
  auto [sorted, order] = flat.sort(/*stable=*/true, 0, false);
  at::Tensor starts = at::ones({n}, self.options().dtype(at::kBool));
  if (n > 1) starts.narrow(0, 1, n - 1).copy_(sorted.narrow(0, 1, n - 1) != sorted.narrow(0, 0, n - 1));
  int64_t distinct = starts.sum().item<int64_t>();  // the host sync
  at::Tensor run_start = at::nonzero_static(starts, distinct, -1).reshape(-1);
  at::Tensor values = sorted.index_select(0, run_start);
  at::Tensor inverse, counts;
  if (return_inverse) {
    at::Tensor rank_sorted = starts.to(at::kLong).cumsum(0) - 1;
    inverse = at::empty({n}, rank_sorted.options()).scatter_(0, order, rank_sorted).reshape(self.sizes());
  } else {
    inverse = at::empty({0}, self.options().dtype(at::kLong));
  }
  if (return_counts) {
    at::Tensor ends = at::cat({run_start.narrow(0, 1, distinct - 1),
                               at::full({1}, n, run_start.options())});
    counts = ends - run_start;
  } else {
    counts = at::empty({0}, self.options().dtype(at::kLong));
  }
  return {values, inverse, counts};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", nonzero_kernel);
  m.impl("nonzero.out", nonzero_out);
  m.impl("masked_select", masked_select);
  m.impl("_unique2", unique2);
}

}  // namespace
}  // namespace tpu::engine
