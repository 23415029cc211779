// N-d pooling for what pooling.cc (2-D) does not cover: avg_pool3d, max_pool3d_with_indices,
// _adaptive_avg_pool3d, adaptive_max_pool2d/3d, and their backwards.
//
// Max pooling follows PyTorch's CPU kernels: the first maximum in row-major window order wins,
// a NaN beats every number, and among NaNs the last one wins (the kernels replace the running
// maximum on `val > max || isnan(val)`). Indices are flat over the spatial dims of the input.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"
#include "lowering/spatial_helpers.h"

namespace tpu::lowering {
namespace {

using namespace hlo;
using namespace spatial;

struct Pool {
  int n = 3;  // spatial dims (the last n)
  std::vector<int64_t> k, s, p, d;
  bool ceil_mode = false;
  std::vector<PoolGeom> g;
};

void check_rank(const Value& x, int n, const char* op) {
  if (x.rank() != n + 1 && x.rank() != n + 2) {
    throw std::invalid_argument(std::string(op) + ": expected a " + std::to_string(n + 1) + "-D or " +
                                std::to_string(n + 2) + "-D input");
  }
}

// (kernel_size, stride, padding[, dilation], ceil_mode) starting at argument `k_arg`.
Pool pool_of(const Context& c, const Value& x, int n, size_t k_arg, bool has_dilation, size_t ceil_arg) {
  Pool a;
  a.n = n;
  a.k = expand(c.ints(k_arg), n, 1);
  a.s = c.ints(k_arg + 1).empty() ? a.k : expand(c.ints(k_arg + 1), n, 1);
  a.p = expand(c.ints(k_arg + 2), n, 0);
  a.d = has_dilation ? expand(c.ints(k_arg + 3), n, 1) : std::vector<int64_t>(n, 1);
  a.ceil_mode = c.bool_arg(ceil_arg);
  int64_t r = x.rank();
  for (int i = 0; i < n; ++i) {
    if (a.k[i] <= 0 || a.s[i] <= 0 || a.d[i] <= 0 || a.p[i] < 0) {
      throw std::runtime_error("pooling: kernel size, stride and dilation must be greater than zero, padding non-negative");
    }
    a.g.push_back(pool_geom(x.shape()[r - n + i], a.k[i], a.s[i], a.p[i], a.d[i], a.ceil_mode));
  }
  return a;
}

// Window attributes over all dims: `v` for the last n, `dflt` elsewhere.
std::vector<int64_t> win(int64_t rank, const std::vector<int64_t>& v, int64_t dflt) {
  std::vector<int64_t> r(rank, dflt);
  for (size_t i = 0; i < v.size(); ++i) r[rank - v.size() + i] = v[i];
  return r;
}

Value pad_spatial(Builder& b, Value x, const Pool& a, Value fill) {
  int64_t r = x.rank();
  std::vector<int64_t> lo(r, 0), hi(r, 0), in(r, 0);
  for (int i = 0; i < a.n; ++i) {
    lo[r - a.n + i] = a.g[i].lo;
    hi[r - a.n + i] = a.g[i].hi;
  }
  return pad(b, x, fill, lo, hi, in);
}

// The (value, index) pair PyTorch's max kernels keep: a wins over b?
Value a_wins(Builder& rb, Value va, Value ia, Value vb, Value ib, bool floating) {
  Value gt = compare(rb, va, vb, Direction::GT);
  Value eq = compare(rb, va, vb, Direction::EQ);
  Value lt_i = compare(rb, ia, ib, Direction::LT);
  Value take = binary(rb, Binary::Or, gt, binary(rb, Binary::And, eq, lt_i));
  if (!floating) return take;
  Value a_nan = compare(rb, va, va, Direction::NE), b_nan = compare(rb, vb, vb, Direction::NE);
  Value not_b_nan = unary(rb, Unary::Not, b_nan);
  Value one_nan = binary(rb, Binary::Or, binary(rb, Binary::And, a_nan, not_b_nan),
                         binary(rb, Binary::And, take, not_b_nan));
  Value gt_i = compare(rb, ia, ib, Direction::GT);
  return select(rb, binary(rb, Binary::And, a_nan, b_nan), gt_i, one_nan);
}

std::string pair_region(Builder& b, DType dt) {
  Type sv(dt, {}), si(DType::S64, {});
  return b.region({sv, si, sv, si}, [&](Builder& rb, const std::vector<Value>& v) {
    Value take = a_wins(rb, v[0], v[1], v[2], v[3], is_float(dt));
    return std::vector<Value>{select(rb, take, v[0], v[2]), select(rb, take, v[1], v[3])};
  });
}

Value lowest(Builder& b, DType dt) {
  return is_float(dt) ? constant(b, -std::numeric_limits<double>::infinity(), dt) : reduction_init(b, "max", dt);
}

Value no_index(Builder& b) { return constant(b, 4611686018427387904.0, DType::S64); }

// Flat spatial index of every element of x (over its last n dims).
Value flat_index(Builder& b, const std::vector<int64_t>& shape, int n) {
  int64_t r = static_cast<int64_t>(shape.size());
  Type t(DType::S64, shape);
  Value idx = constant(b, 0, DType::S64, shape);
  int64_t stride = 1;
  for (int64_t i = r - 1; i >= r - n; --i) {
    idx = add(b, idx, mul(b, iota(b, t, i), constant(b, static_cast<double>(stride), DType::S64, shape)));
    stride *= shape[i];
  }
  return idx;
}

// max_poolNd_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode)
Rule max_pool_with_indices(int n, const char* name) {
  return [n, name](Context& c) {
    Builder& b = c.b;
    Value x = c.tensor(0);
    check_rank(x, n, name);
    Pool a = pool_of(c, x, n, 1, true, 5);
    int64_t r = x.rank();
    DType dt = x.dtype();
    std::vector<int64_t> shape = x.shape();
    for (int i = 0; i < n; ++i) shape[r - n + i] = a.g[i].out;
    if (Type(dt, shape).numel() == 0 || x.type.numel() == 0) {
      return std::vector<Value>{zeros(b, c.out(0)), zeros(b, c.out(1))};
    }
    Value vinit = lowest(b, dt), iinit = no_index(b);
    Value xp = pad_spatial(b, x, a, vinit);
    Value ip = pad_spatial(b, flat_index(b, x.shape(), n), a, iinit);
    std::string attrs = "window_dimensions = " + i64_array(win(r, a.k, 1)) +
                        ", window_strides = " + i64_array(win(r, a.s, 1)) +
                        ", window_dilations = " + i64_array(win(r, a.d, 1));
    std::vector<Value> res = b.emit("stablehlo.reduce_window", {xp, ip, vinit, iinit},
                                    {Type(dt, shape), Type(DType::S64, shape)}, attrs, {pair_region(b, dt)});
    return std::vector<Value>{res[0], convert(b, res[1], c.out(1).dtype)};
  };
}

// Gradient of a max pooling: grad_output added at the input positions `indices` names
// (flat over the last n dims of `x_shape`).
Value scatter_back(Builder& b, Value grad, Value indices, const std::vector<int64_t>& x_shape, int n, DType out) {
  DType acc = opmath(out);
  int64_t r = static_cast<int64_t>(x_shape.size());
  int64_t B = 1, S = 1;
  for (int64_t i = 0; i < r - n; ++i) B *= x_shape[i];
  for (int64_t i = r - n; i < r; ++i) S *= x_shape[i];
  int64_t L = B == 0 ? 0 : grad.type.numel() / B;
  if (B * S == 0 || L == 0) return constant(b, 0, out, x_shape);
  Value g = reshape(b, convert(b, grad, acc), {B, L});
  Value idx = reshape(b, convert(b, indices, DType::S64), {B, L, 1});
  Value ind = concatenate(b, {iota(b, Type(DType::S64, {B, L, 1}), 0), idx}, 2);
  ScatterDims d;
  d.inserted_window_dims = {0, 1};
  d.scatter_dims_to_operand_dims = {0, 1};
  d.index_vector_dim = 2;
  Value res = scatter(b, zeros(b, Type(acc, {B, S})), ind, g, d, "add");
  return convert(b, reshape(b, res, x_shape), out);
}

// max_poolNd_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
// ceil_mode, indices)
Rule max_pool_backward(int n) {
  return [n](Context& c) {
    return std::vector<Value>{scatter_back(c.b, c.tensor(0), c.tensor(7), c.tensor(1).shape(), n, c.out().dtype)};
  };
}

Value avg_divisor(Builder& b, const Context& c, const Pool& a, const std::vector<int64_t>& in, bool include_pad,
                  size_t override_arg, DType acc, const std::vector<int64_t>& shape) {
  int64_t r = static_cast<int64_t>(shape.size());
  if (c.has(override_arg)) {
    if (c.int_arg(override_arg) == 0) throw std::runtime_error("divisor must be not zero");
    return constant(b, static_cast<double>(c.int_arg(override_arg)), acc, shape);
  }
  Value d = constant(b, 1, acc, shape);
  for (int i = 0; i < a.n; ++i) {
    Value v = convert(b, constant_i64_vector(b, avg_counts(in[i], a.k[i], a.s[i], a.p[i], a.g[i].out, include_pad)), acc);
    d = mul(b, d, broadcast_in_dim(b, v, shape, {r - a.n + i}));
  }
  return d;
}

std::vector<int64_t> spatial_in(const Value& x, int n) {
  return std::vector<int64_t>(x.shape().end() - n, x.shape().end());
}

// avg_poolNd(self, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override?)
Rule avg_pool(int n, const char* name) {
  return [n, name](Context& c) {
    Builder& b = c.b;
    Value x = c.tensor(0);
    check_rank(x, n, name);
    Pool a = pool_of(c, x, n, 1, false, 4);
    const Type& out = c.out();
    if (out.numel() == 0 || x.type.numel() == 0) return std::vector<Value>{zeros(b, out)};
    DType acc = opmath(out.dtype);
    int64_t r = x.rank();
    Value xp = pad_spatial(b, convert(b, x, acc), a, constant(b, 0, acc));
    std::vector<std::pair<int64_t, int64_t>> nopad(r, {0, 0});
    Value s = reduce_window(b, xp, "add", win(r, a.k, 1), win(r, a.s, 1), nopad);
    Value d = avg_divisor(b, c, a, spatial_in(x, n), c.bool_arg(5), 6, acc, s.shape());
    return std::vector<Value>{convert(b, div(b, s, d), out.dtype)};
  };
}

// avg_poolNd_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
// count_include_pad, divisor_override?)
Rule avg_pool_backward(int n) {
  return [n](Context& c) {
    Builder& b = c.b;
    Value x = c.tensor(1);
    Pool a = pool_of(c, x, n, 2, false, 5);
    const Type& out = c.out();
    DType acc = opmath(out.dtype);
    int64_t r = x.rank();
    Value go = convert(b, c.tensor(0), acc);
    if (go.type.numel() == 0 || x.type.numel() == 0) return std::vector<Value>{zeros(b, out)};
    std::vector<int64_t> in = spatial_in(x, n);
    go = div(b, go, avg_divisor(b, c, a, in, c.bool_arg(6), 7, acc, go.shape()));
    // Dilate by the stride and pad so that a stride-1 window sum gives each input's windows.
    std::vector<int64_t> lo(r, 0), hi(r, 0), interior(r, 0);
    for (int i = 0; i < n; ++i) {
      int64_t d = r - n + i;
      interior[d] = a.s[i] - 1;
      lo[d] = a.k[i] - 1 - a.p[i];
      hi[d] = in[i] + a.k[i] - 1 - lo[d] - dilate(go.shape()[d], a.s[i]);
    }
    Value gp = pad(b, go, constant(b, 0, acc), lo, hi, interior);
    std::vector<std::pair<int64_t, int64_t>> nopad(r, {0, 0});
    Value res = reduce_window(b, gp, "add", win(r, a.k, 1), std::vector<int64_t>(r, 1), nopad);
    return std::vector<Value>{convert(b, res, out.dtype)};
  };
}

// ---- Adaptive pooling: output o of a dim of size `in` covers [floor(o*in/out), ceil((o+1)*in/out));
// averages are window sums (spatial::adaptive_avg), so a NaN reaches only its windows ----

int64_t window_start(int64_t o, int64_t in, int64_t out) { return adaptive_start(o, in, out); }
int64_t window_end(int64_t o, int64_t in, int64_t out) { return adaptive_end(o, in, out); }

// PyTorch's CPU kernels of adaptive pooling are floating-point only: NotImplementedError,
// named as the CPU kernel names itself, for other dtypes.
void require_float(const Value& x, const std::string& cpu_kernel) { require_dtype(is_float(x.dtype()), cpu_kernel, x.dtype()); }

void check_output_size(const std::vector<int64_t>& os, const char* op) {
  for (int64_t o : os) {
    if (o < 0) throw std::runtime_error(std::string(op) + ": elements of output_size must be greater than or equal to 0");
  }
}

// _adaptive_avg_pool3d(self, output_size)
std::vector<Value> adaptive_avg_pool3d(Context& c) {
  Builder& b = c.b;
  Value x = c.tensor(0);
  check_rank(x, 3, "adaptive_avg_pool3d");
  require_float(x, "adaptive_avg_pool3d_cpu");
  std::vector<int64_t> os = expand(c.ints(1), 3, 1);
  check_output_size(os, "adaptive_avg_pool3d");
  const Type& out = c.out();
  if (out.numel() == 0) return {zeros(b, out)};
  DType acc = opmath(out.dtype);
  return {convert(b, adaptive_avg(b, convert(b, x, acc), os), out.dtype)};
}

// _adaptive_avg_pool3d_backward(grad_output, self)
std::vector<Value> adaptive_avg_pool3d_backward(Context& c) {
  Builder& b = c.b;
  Value g = c.tensor(0), x = c.tensor(1);
  // The CPU template's checks, before anything reads the spatial dims.
  if (x.rank() != 4 && x.rank() != 5) {
    throw InvalidCall("adaptive_avg_pool3d_backward(): Expected 4D or 5D tensor, but got " + shape_str(x.shape()));
  }
  if (g.rank() != x.rank()) {
    throw InvalidCall("adaptive_avg_pool3d_backward_out_cpu_template: Expected dimensions " + std::to_string(x.rank()) +
                      " for `gradOutput_` but got dimensions " + std::to_string(g.rank()));
  }
  spatial::check_grad_leading_dims("adaptive_avg_pool3d_backward", g, x, 3);
  const Type& out = c.out();
  if (out.numel() == 0 || g.type.numel() == 0) return {zeros(b, out)};
  DType acc = opmath(out.dtype);
  std::vector<int64_t> in(x.shape().end() - 3, x.shape().end());
  return {convert(b, adaptive_avg_grad(b, convert(b, g, acc), in), out.dtype)};
}

// One adaptive max step along `dim`: values and flat indices of the window maxima.
// `stride` is the flat-index weight of a position along dim.
std::pair<Value, Value> adaptive_max_step(Builder& b, Value v, Value idx, int64_t dim, int64_t out, int64_t stride) {
  int64_t r = v.rank();
  int64_t in = v.shape()[dim];
  int64_t K = 0;
  for (int64_t o = 0; o < out; ++o) K = std::max(K, window_end(o, in, out) - window_start(o, in, out));
  // Positions [out, K], clamped to the window's last element (a repeat changes no maximum).
  std::vector<int64_t> pos;
  for (int64_t o = 0; o < out; ++o) {
    int64_t s = window_start(o, in, out), e = window_end(o, in, out);
    for (int64_t k = 0; k < K; ++k) pos.push_back(std::min(s + k, e - 1));
  }
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i) if (i != dim) perm.push_back(i);
  perm.push_back(dim);
  Value vt = transpose(b, v, perm), it = transpose(b, idx, perm);
  std::vector<int64_t> lead(vt.shape().begin(), vt.shape().end() - 1);
  GatherDims gd;
  for (int64_t i = 0; i < r - 1; ++i) gd.offset_dims.push_back(i);
  gd.collapsed_slice_dims = {r - 1};
  gd.start_index_map = {r - 1};
  gd.index_vector_dim = 1;
  std::vector<int64_t> sizes = lead;
  sizes.push_back(1);
  std::vector<int64_t> gshape = lead;
  gshape.push_back(out * K);
  Value where = reshape(b, constant_i64_vector(b, pos), {out * K, 1});
  std::vector<int64_t> wshape = lead;
  wshape.insert(wshape.end(), {out, K});
  Value gv = reshape(b, gather(b, vt, where, gd, sizes, gshape), wshape);
  Value gi = reshape(b, gather(b, it, where, gd, sizes, gshape), wshape);
  Value p = broadcast_in_dim(b, reshape(b, constant_i64_vector(b, pos), {out, K}), wshape, {r - 1, r});
  gi = add(b, gi, mul(b, p, constant(b, static_cast<double>(stride), DType::S64, wshape)));
  std::vector<int64_t> rshape = lead;
  rshape.push_back(out);
  DType dt = v.dtype();
  std::vector<Value> red = b.emit("stablehlo.reduce", {gv, gi, lowest(b, dt), no_index(b)},
                                  {Type(dt, rshape), Type(DType::S64, rshape)}, "dimensions = " + i64_array({r}),
                                  {pair_region(b, dt)});
  std::vector<int64_t> inv(r);
  for (int64_t i = 0; i < r; ++i) inv[perm[i]] = i;
  return {transpose(b, red[0], inv), transpose(b, red[1], inv)};
}

// adaptive_max_poolNd(self, output_size) -> (out, indices): separable, last dim first (the
// row-major first maximum, and the last NaN, survive both steps).
Rule adaptive_max_pool(int n, const char* name) {
  return [n, name](Context& c) {
    Builder& b = c.b;
    Value x = c.tensor(0);
    check_rank(x, n, name);
    require_float(x, n == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d_cpu");
    std::vector<int64_t> os = expand(c.ints(1), n, 1);
    check_output_size(os, name);
    if (c.out(0).numel() == 0 || x.type.numel() == 0) {
      return std::vector<Value>{zeros(b, c.out(0)), zeros(b, c.out(1))};
    }
    int64_t r = x.rank();
    Value v = x, idx = constant(b, 0, DType::S64, x.shape());
    int64_t stride = 1;
    for (int i = n - 1; i >= 0; --i) {
      int64_t dim = r - n + i;
      int64_t in = x.shape()[dim];
      auto [nv, ni] = adaptive_max_step(b, v, idx, dim, os[i], stride);
      v = nv;
      idx = ni;
      stride *= in;
    }
    return std::vector<Value>{v, convert(b, idx, c.out(1).dtype)};
  };
}

// adaptive_max_poolNd_backward(grad_output, self, indices)
Rule adaptive_max_pool_backward(int n) {
  return [n](Context& c) {
    Value g = c.tensor(0), x = c.tensor(1), idx = c.tensor(2);
    // Unbatched (n+1) or batched (n+2) inputs, gradient and indices of one shape.
    if ((x.rank() != n + 1 && x.rank() != n + 2) || g.rank() != x.rank() || idx.shape() != g.shape()) {
      throw InvalidCall("adaptive_max_pool" + std::to_string(n) + "d_backward: expected " +
                                  std::to_string(n + 1) + "-D or " + std::to_string(n + 2) +
                                  "-D input with gradient and indices of one shape, got input " + x.type.str() +
                                  ", gradient " + g.type.str() + ", indices " + idx.type.str());
    }
    return std::vector<Value>{scatter_back(c.b, g, idx, x.shape(), n, c.out().dtype)};
  };
}

const Registrar registrar({
    {"avg_pool3d", avg_pool(3, "avg_pool3d")},
    {"avg_pool3d_backward", avg_pool_backward(3)},
    {"avg_pool3d_backward.grad_input", avg_pool_backward(3)},
    {"max_pool3d_with_indices", max_pool_with_indices(3, "max_pool3d")},
    {"max_pool3d_with_indices_backward", max_pool_backward(3)},
    {"max_pool3d_with_indices_backward.grad_input", max_pool_backward(3)},
    {"_adaptive_avg_pool3d", adaptive_avg_pool3d},
    {"_adaptive_avg_pool3d_backward", adaptive_avg_pool3d_backward},
    {"adaptive_avg_pool3d_backward.grad_input", adaptive_avg_pool3d_backward},
    {"adaptive_max_pool2d", adaptive_max_pool(2, "adaptive_max_pool2d")},
    {"adaptive_max_pool2d_backward", adaptive_max_pool_backward(2)},
    {"adaptive_max_pool2d_backward.grad_input", adaptive_max_pool_backward(2)},
    {"adaptive_max_pool3d", adaptive_max_pool(3, "adaptive_max_pool3d")},
    {"adaptive_max_pool3d_backward", adaptive_max_pool_backward(3)},
    {"adaptive_max_pool3d_backward.grad_input", adaptive_max_pool_backward(3)},
});

}  // namespace
}  // namespace tpu::lowering
