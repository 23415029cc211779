// unique_consecutive / unique_dim_consecutive: runs of equal neighbours collapse to one value.
// The number of runs depends on the data, so like nonzero and _unique2 (eager/data_dependent.cc)
// this makes one host sync to learn it, then runs lowered ops with that static size. NaN never
// equals its neighbour, so each NaN is its own run, as on the CPU.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

namespace tpu::engine {
namespace {

at::TensorOptions long_options(const at::Tensor& t) { return t.options().dtype(at::kLong); }

// Run boundaries of `rows` (n, k): true where row i differs from row i - 1 (row 0 starts a run).
at::Tensor run_starts(const at::Tensor& rows) {
  int64_t n = rows.size(0);
  at::Tensor starts = at::ones({n}, rows.options().dtype(at::kBool));
  if (n > 1) {
    at::Tensor differs = rows.narrow(0, 1, n - 1).ne(rows.narrow(0, 0, n - 1));
    starts.narrow(0, 1, n - 1).copy_(differs.dim() > 1 ? differs.any(1) : differs);
  }
  return starts;
}

struct Runs {
  at::Tensor first;    // index of each run's first element, (runs,)
  at::Tensor inverse;  // run of every element, (n,)
  at::Tensor counts;   // length of each run, (runs,)
};

Runs runs_of(const at::Tensor& rows) {
  int64_t n = rows.size(0);
  at::Tensor starts = run_starts(rows);
  int64_t runs = starts.sum().item<int64_t>();  // the host sync
  Runs r;
  r.first = at::nonzero_static(starts, runs, -1).reshape(-1);
  r.inverse = starts.to(at::kLong).cumsum(0).sub(1);
  at::Tensor ends = at::cat({r.first.narrow(0, 1, runs - 1), at::full({1}, n, long_options(rows))});
  r.counts = ends.sub(r.first);
  return r;
}

void check_dtype(const at::Tensor& self, const char* op) {
  TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", op, "\" not implemented for '", self.scalar_type(), "'");
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_dim_runs(const at::Tensor& self, int64_t dim,
                                                                      bool /*return_inverse*/,
                                                                      bool /*return_counts*/) {
  check_dtype(self, "unique_dim");
  dim = at::maybe_wrap_dim(dim, self.dim());
  at::Tensor empty_long = at::empty({0}, long_options(self));
  if (self.size(dim) == 0) return {self.clone(), empty_long, empty_long.clone()};
  TORCH_CHECK(self.numel() > 0, "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
  // The CPU returns the inverse and the counts whatever the flags say.
  Runs r = runs_of(self.movedim(dim, 0).reshape({self.size(dim), -1}));
  return {self.index_select(dim, r.first), r.inverse, r.counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_runs(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  if (dim.has_value() && !(self.dim() == 1 && at::maybe_wrap_dim(*dim, 1) == 0)) {
    return unique_dim_runs(self, *dim, return_inverse, return_counts);
  }
  check_dtype(self, "unique");
  at::Tensor flat = self.reshape({-1});
  at::Tensor inverse = at::empty({0}, long_options(self)), counts = at::empty({0}, long_options(self));
  if (flat.numel() == 0) {
    if (return_inverse) inverse = at::empty(self.sizes(), long_options(self));
    return {flat.clone(), inverse, counts};
  }
  Runs r = runs_of(flat);
  if (return_inverse) inverse = r.inverse.reshape(self.sizes());
  if (return_counts) counts = r.counts;
  return {flat.index_select(0, r.first), inverse, counts};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("unique_consecutive", unique_runs);
  m.impl("unique_dim_consecutive", unique_dim_runs);
}

}  // namespace
}  // namespace tpu::engine
