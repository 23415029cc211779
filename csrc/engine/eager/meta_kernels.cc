// Meta kernels for ATen ops that PyTorch ships without one. The engine learns result shapes,
// dtypes and strides from the Meta dispatch key (op_outputs.cc); without a meta kernel an op
// with a lowering rule would still run on the CPU fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

namespace tpu::engine {
namespace {

// geqrf(A) -> (a, tau): a like A in batched column-major layout (as the CPU's LAPACK result),
// tau [..., min(m, n)].
std::tuple<at::Tensor, at::Tensor> geqrf_meta(const at::Tensor& self) {
  TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
  auto sizes = self.sizes().vec();
  int64_t m = sizes[sizes.size() - 2], n = sizes.back();
  std::vector<int64_t> strides(sizes.size());
  int64_t mat = m * n;
  strides[sizes.size() - 2] = 1;
  strides[sizes.size() - 1] = std::max<int64_t>(m, 1);
  int64_t stride = std::max<int64_t>(mat, 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 3; i >= 0; --i) {
    strides[i] = stride;
    stride *= std::max<int64_t>(sizes[i], 1);
  }
  at::Tensor a = at::empty_strided(sizes, strides, self.options().device(c10::kMeta));
  std::vector<int64_t> tau_sizes(sizes.begin(), sizes.end() - 2);
  tau_sizes.push_back(std::min(m, n));
  return {a, at::empty(tau_sizes, self.options().device(c10::kMeta))};
}

std::tuple<at::Tensor&, at::Tensor&> geqrf_out_meta(const at::Tensor& self, at::Tensor& a, at::Tensor& tau) {
  auto [ra, rt] = geqrf_meta(self);
  a.resize_(ra.sizes());
  tau.resize_(rt.sizes());
  return {a, tau};
}

// linalg_lstsq(A, B, rcond, *, driver): PyTorch's composite kernel calls linalg_lstsq.out,
// which has CPU/CUDA kernels only. Shapes as the CPU kernel returns them; gelsd/gelss with
// m > n are given full-rank residuals (the rule sends those calls to the CPU anyway).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> lstsq_meta(const at::Tensor& a, const at::Tensor& b,
                                                                      std::optional<double> rcond,
                                                                      std::optional<c10::string_view> driver_name) {
  TORCH_CHECK(a.dim() >= 2, "torch.linalg.lstsq: input must have at least 2 dimensions.");
  TORCH_CHECK(b.dim() >= 1, "torch.linalg.lstsq: other must have at least 1 dimension.");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's dtype ",
              a.scalar_type(), " and other's dtype ", b.scalar_type());
  TORCH_CHECK(at::isFloatingType(a.scalar_type()) || at::isComplexType(a.scalar_type()),
              "torch.linalg.lstsq: Expected a floating point or complex tensor as input. Got ", a.scalar_type());
  std::string driver = driver_name ? std::string(*driver_name) : "gelsy";
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss",
              "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  auto as = a.sizes().vec();
  int64_t m = as[as.size() - 2], n = as.back();
  int64_t dim_diff = a.dim() - b.dim();
  TORCH_CHECK(0 <= dim_diff && dim_diff <= 1,
              "torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and (input.dim() - other.dim()) <= 1");
  bool vector = dim_diff == 1;
  auto bs = b.sizes().vec();
  if (vector) bs.push_back(1);
  TORCH_CHECK(bs[bs.size() - 2] == m, "torch.linalg.lstsq: input.size(-2) should match other.size(-", vector ? 1 : 2, ")");
  int64_t k = bs.back();
  std::vector<int64_t> batch = at::infer_size(at::IntArrayRef(as.data(), as.size() - 2), at::IntArrayRef(bs.data(), bs.size() - 2));
  auto opts = a.options().device(c10::kMeta);
  auto real = opts.dtype(c10::toRealValueType(a.scalar_type()));
  std::vector<int64_t> xs = batch;
  xs.push_back(n);
  if (!vector) xs.push_back(k);
  std::vector<int64_t> res{0}, rank{0}, sv{0};
  if (m > n && driver != "gelsy") {
    res = batch;
    res.push_back(k);  // [..., 1] for a vector B too
  }
  if (driver != "gels") rank = batch;
  if (driver == "gelsd" || driver == "gelss") {
    sv = batch;
    sv.push_back(std::min(m, n));
  }
  return {at::empty(xs, opts), at::empty(res, real), at::empty(rank, opts.dtype(at::kLong)), at::empty(sv, real)};
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> lstsq_out_meta(
    const at::Tensor& a, const at::Tensor& b, std::optional<double> rcond, std::optional<c10::string_view> driver,
    at::Tensor& solution, at::Tensor& residuals, at::Tensor& rank, at::Tensor& singular_values) {
  auto r = lstsq_meta(a, b, rcond, driver);
  solution.resize_(std::get<0>(r).sizes());
  residuals.resize_(std::get<1>(r).sizes());
  rank.resize_(std::get<2>(r).sizes());
  singular_values.resize_(std::get<3>(r).sizes());
  return {solution, residuals, rank, singular_values};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, Meta, m) {
  m.impl("geqrf", geqrf_meta);
  m.impl("geqrf.a", geqrf_out_meta);
  m.impl("linalg_lstsq", lstsq_meta);
  m.impl("linalg_lstsq.out", lstsq_out_meta);
}

}  // namespace tpu::engine
