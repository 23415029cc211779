// Helpers shared by the spatial rule files (see spatial_helpers.h).
#include "lowering/spatial_helpers.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "hlo/ops.h"

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
