// Helpers shared by the spatial rule files (see spatial_helpers.h).
#include "lowering/spatial_helpers.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "hlo/ops.h"
#include "lowering/registry.h"

namespace tpu::lowering::spatial {

using namespace hlo;

std::vector<int64_t> expand(const std::vector<int64_t>& v, size_t n, int64_t dflt) {
  if (v.empty()) return std::vector<int64_t>(n, dflt);
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n) throw std::invalid_argument("expected " + std::to_string(n) + " values in a conv/pool parameter");
  return v;
}

std::vector<int64_t> range(int64_t lo, int64_t hi) {
  std::vector<int64_t> r;
  for (int64_t i = lo; i < hi; ++i) r.push_back(i);
  return r;
}

int64_t dilate(int64_t s, int64_t d) { return s == 0 ? 0 : 1 + d * (s - 1); }

// A constant [rows, cols] matrix of dtype f32 (or f64).
Value matrix(Builder& b, const std::vector<double>& m, int64_t rows, int64_t cols, DType dt) {
  Type t(dt, {rows * cols});
  std::string body = "[";
  char buf[64];
  for (size_t i = 0; i < m.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%.17e", m[i]);
    body += (i ? ", " : "") + std::string(buf);
  }
  body += "]";
  if (m.empty()) body = "";
  Value v = b.emit1("stablehlo.constant", {}, t, "value = dense<" + body + "> : " + t.str());
  return reshape(b, v, {rows, cols});
}

// y[..., o, p] = sum_{h, w} Mh[o, h] * x[..., h, w] * Mw[p, w]
Value separable(Builder& b, Value x, Value mh, Value mw) {
  int64_t r = x.rank();
  // Contract W: [..., H, OW]
  Value y = dot_general(b, x, mw, {}, {}, {r - 1}, {1}, x.dtype());
  // Contract H: [..., OW, OH]
  y = dot_general(b, y, mh, {}, {}, {r - 2}, {1}, x.dtype());
  std::vector<int64_t> perm = range(0, r - 2);
  perm.push_back(r - 1);
  perm.push_back(r - 2);
  return transpose(b, y, perm);
}

Value transpose2(Builder& b, Value m) { return transpose(b, m, {1, 0}); }

PoolGeom pool_geom(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
  int64_t eff = d * (k - 1) + 1;
  int64_t num = in + 2 * p - eff + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  if (out < 0) out = 0;
  return {out, p, (out - 1) * s + eff - in - p};
}


std::vector<int64_t> avg_counts(int64_t in, int64_t k, int64_t s, int64_t p, int64_t out, bool include_pad) {
  std::vector<int64_t> r;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * s - p, end = std::min(start + k, in + p);
    int64_t pool = end - start;
    start = std::max<int64_t>(start, 0);
    end = std::min(end, in);
    r.push_back(include_pad ? pool : end - start);
  }
  return r;
}

}  // namespace tpu::lowering::spatial

namespace tpu::lowering::spatial {

using namespace hlo;

Value window_sum(Builder& b, Value x, int64_t dim, const std::vector<int64_t>& starts,
                 const std::vector<int64_t>& lens) {
  int64_t r = x.rank(), in = x.shape()[dim], J = static_cast<int64_t>(starts.size());
  int64_t K = 1;
  for (int64_t l : lens) K = std::max(K, l);
  std::vector<int64_t> out_shape = x.shape();
  out_shape[dim] = J;
  if (Type(x.dtype(), out_shape).numel() == 0 || in == 0) return constant(b, 0, x.dtype(), out_shape);
  std::vector<int64_t> pos, valid;
  for (int64_t j = 0; j < J; ++j) {
    for (int64_t k = 0; k < K; ++k) {
      pos.push_back(std::min(starts[j] + k, in - 1));
      valid.push_back(k < lens[j] ? 1 : 0);
    }
  }
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i) if (i != dim) perm.push_back(i);
  perm.push_back(dim);
  Value xt = transpose(b, x, perm);
  std::vector<int64_t> lead(xt.shape().begin(), xt.shape().end() - 1);
  GatherDims gd;
  for (int64_t i = 0; i < r - 1; ++i) gd.offset_dims.push_back(i);
  gd.collapsed_slice_dims = {r - 1};
  gd.start_index_map = {r - 1};
  gd.index_vector_dim = 1;
  std::vector<int64_t> sizes = lead, gshape = lead, wshape = lead;
  sizes.push_back(1);
  gshape.push_back(J * K);
  wshape.insert(wshape.end(), {J, K});
  Value where = reshape(b, constant_i64_vector(b, pos), {J * K, 1});
  Value g = reshape(b, gather(b, xt, where, gd, sizes, gshape), wshape);
  // Masked with select, not a multiply: 0 * inf would be NaN.
  Value keep = compare(b, reshape(b, constant_i64_vector(b, valid), {J, K}), constant(b, 1, DType::S64, {J, K}), Direction::EQ);
  g = select(b, broadcast_in_dim(b, keep, wshape, {r - 1, r}), g, constant(b, 0, x.dtype(), wshape));
  Value s = reduce(b, g, {r}, "add");  // lead + [J]
  std::vector<int64_t> inv(r);
  for (int64_t i = 0; i < r; ++i) inv[perm[i]] = i;
  return transpose(b, s, inv);
}

int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

namespace {
// Window sizes of each output along one dim, as a vector of dtype dt broadcast along `dim`.
Value window_sizes(Builder& b, int64_t in, int64_t out, DType dt, const std::vector<int64_t>& shape, int64_t dim) {
  std::vector<int64_t> n;
  for (int64_t o = 0; o < out; ++o) n.push_back(adaptive_end(o, in, out) - adaptive_start(o, in, out));
  return broadcast_in_dim(b, convert(b, constant_i64_vector(b, n), dt), shape, {dim});
}
}  // namespace

Value adaptive_avg(Builder& b, Value x, const std::vector<int64_t>& os) {
  int64_t r = x.rank(), n = static_cast<int64_t>(os.size());
  Value y = x;
  for (int64_t i = 0; i < n; ++i) {
    int64_t dim = r - n + i, in = x.shape()[dim];
    std::vector<int64_t> starts, lens;
    for (int64_t o = 0; o < os[i]; ++o) {
      starts.push_back(adaptive_start(o, in, os[i]));
      lens.push_back(adaptive_end(o, in, os[i]) - starts.back());
    }
    y = window_sum(b, y, dim, starts, lens);
  }
  // One division by the window's size, as the CPU kernel does.
  Value d = constant(b, 1, x.dtype(), y.shape());
  for (int64_t i = 0; i < n; ++i) {
    int64_t dim = r - n + i;
    d = mul(b, d, window_sizes(b, x.shape()[dim], os[i], x.dtype(), y.shape(), dim));
  }
  return div(b, y, d);
}

void check_grad_leading_dims(const std::string& op, Value grad, Value self, int64_t spatial) {
  const auto &g = grad.shape(), &x = self.shape();
  if (g.size() == x.size() && std::equal(g.begin(), g.end() - spatial, x.begin())) return;
  throw InvalidCall(op + ": grad_output has shape " + shape_str(g) + ", its leading dims must be self's " +
                    shape_str(std::vector<int64_t>(x.begin(), x.end() - spatial)));
}

Value adaptive_avg_grad(Builder& b, Value g, const std::vector<int64_t>& in) {
  int64_t r = g.rank(), n = static_cast<int64_t>(in.size());
  Value d = constant(b, 1, g.dtype(), g.shape());
  for (int64_t i = 0; i < n; ++i) {
    int64_t dim = r - n + i;
    d = mul(b, d, window_sizes(b, in[i], g.shape()[dim], g.dtype(), g.shape(), dim));
  }
  Value y = div(b, g, d);
  for (int64_t i = 0; i < n; ++i) {
    int64_t dim = r - n + i, out = g.shape()[dim];
    // Input position p is in the windows of outputs [first(p), last(p)] (windows are monotonic).
    // Both window ends grow with o, so one forward sweep finds first(p) and last(p).
    std::vector<int64_t> starts, lens;
    int64_t first = 0, last = -1;
    for (int64_t p = 0; p < in[i]; ++p) {
      while (first < out && adaptive_end(first, in[i], out) <= p) ++first;
      while (last + 1 < out && adaptive_start(last + 1, in[i], out) <= p) ++last;
      starts.push_back(std::min(first, std::max<int64_t>(out - 1, 0)));
      lens.push_back(std::max<int64_t>(last - first + 1, 0));
    }
    y = window_sum(b, y, dim, starts, lens);
  }
  return y;
}

}  // namespace tpu::lowering::spatial
