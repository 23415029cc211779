// grid_sampler_2d / grid_sampler_3d (F.grid_sample) and their backwards.
//
// Every output position reads a few input taps: 2^n (bilinear), 1 (nearest) or 4x4 (bicubic,
// 2-D only). Each tap has a flat input index, an in-bounds flag and a weight (the product of
// per-dim weights); the forward is one gather of all taps and a weighted sum, the input
// gradient one scatter-add of grad * weight, the grid gradient the sum of value * grad * the
// weight's derivative, times the derivative of the coordinate transform.
//
// Semantics of PyTorch's CPU kernels, including non-finite grids. The 2-D kernel is
// vectorized: out-of-bounds taps load 0 and are still multiplied by their weight (a NaN or
// inf coordinate gives NaN with zeros padding), and clipping maps NaN to 0. The 3-D kernel is
// scalar: out-of-bounds taps are skipped, and clipping maps NaN to size - 1 (std::min/max).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

enum class Interp { Bilinear = 0, Nearest = 1, Bicubic = 2 };
enum class Padding { Zeros = 0, Border = 1, Reflection = 2 };

// Per-call geometry: x is [N, C, *in], grid [N, *out, n], all positions flattened to [N, P].
struct Sampler {
  Builder& b;
  int n;
  Interp interp;
  Padding padding;
  bool align;
  DType acc;
  int64_t N, C, P;
  std::vector<int64_t> in, out;

  std::vector<int64_t> np() const { return {N, P}; }
  Value k(double v) const { return constant(b, v, acc, np()); }
  Value lt(Value x, Value y) const { return compare(b, x, y, Direction::LT); }
  Value gt(Value x, Value y) const { return compare(b, x, y, Direction::GT); }
  Value both(Value x, Value y) const { return binary(b, Binary::And, x, y); }
};

// One tap along one dim: the coordinate it reads, its weight and d(weight)/d(coordinate).
struct Tap1 {
  Value coord, w, dw;
};

// A tap over all dims.
struct Tap {
  Value flat, inb, w;
  std::vector<Value> dw;  // per spatial dim (outermost first)
};

// clip_coordinates: clamp to [0, size - 1]; NaN -> 0 (2-D kernel) or size - 1 (3-D kernel).
// `grad` (if given) becomes 1 strictly inside, else 0.
Value clip(const Sampler& s, Value c, int64_t size, Value* grad) {
  double hi = static_cast<double>(size - 1);
  if (grad) *grad = select(s.b, s.both(s.gt(c, s.k(0)), s.lt(c, s.k(hi))), s.k(1), s.k(0));
  Value r = select(s.b, s.gt(c, s.k(hi)), s.k(hi), c);
  r = select(s.b, s.lt(c, s.k(0)), s.k(0), r);
  return select(s.b, compare(s.b, c, c, Direction::NE), s.k(s.n == 2 ? 0 : hi), r);
}

// reflect_coordinates: fold c into [twice_low / 2, twice_high / 2]; `grad` gets +-1.
Value reflect(const Sampler& s, Value c, int64_t twice_low, int64_t twice_high, Value* grad) {
  Builder& b = s.b;
  if (twice_low == twice_high) {
    *grad = s.k(0);
    return s.k(0);
  }
  double mn = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  Value a = sub(b, c, s.k(mn));
  Value sign = select(b, s.lt(a, s.k(0)), s.k(-1), s.k(1));
  a = unary(b, Unary::Abs, a);
  Value extra = binary(b, Binary::Remainder, a, s.k(span));
  Value flips = unary(b, Unary::Floor, div(b, a, s.k(span)));
  // The CPU counts flips in an int: past INT_MAX the cast gives INT_MIN (x86), an even count.
  Value odd = binary(b, Binary::And, compare(b, binary(b, Binary::Remainder, flips, s.k(2)), s.k(0), Direction::NE),
                     s.lt(flips, s.k(2147483648.0)));
  *grad = select(b, odd, neg(b, sign), sign);
  return select(b, odd, add(b, sub(b, s.k(span), extra), s.k(mn)), add(b, extra, s.k(mn)));
}

// The 2-D kernel's vectorized reflection: fold |c - low| by the period 2 * span with a
// truncated division, then mirror the upper half. It rounds differently from the scalar form
// for huge coordinates, so each kernel gets its own.
Value reflect_vectorized(const Sampler& s, Value c, int64_t twice_low, int64_t twice_high, Value* grad) {
  Builder& b = s.b;
  if (twice_low == twice_high) {
    *grad = s.k(0);
    return s.k(0);
  }
  double mn = twice_low / 2.0, period = static_cast<double>(twice_high - twice_low);
  Value a = sub(b, c, s.k(mn));
  Value sign = select(b, s.lt(a, s.k(0)), s.k(-1), s.k(1));
  a = unary(b, Unary::Abs, a);
  Value q = div(b, a, s.k(period));
  Value trunc = select(b, s.lt(q, s.k(0)), unary(b, Unary::Ceil, q), unary(b, Unary::Floor, q));
  Value extra = sub(b, a, mul(b, trunc, s.k(period)));
  Value mirrored = sub(b, s.k(period), extra);
  Value upper = s.lt(mirrored, extra);
  *grad = select(b, upper, neg(b, sign), sign);
  return add(b, select(b, upper, mirrored, extra), s.k(mn));
}

// compute_coordinates: the padding mode applied to an unnormalized coordinate.
Value pad_coord(const Sampler& s, Value c, int64_t size, Value* grad) {
  if (s.padding == Padding::Border) return clip(s, c, size, grad);
  if (s.padding == Padding::Reflection) {
    Value g_ref, g_clip;
    auto fold = s.n == 2 ? reflect_vectorized : reflect;
    c = s.align ? fold(s, c, 0, 2 * (size - 1), &g_ref) : fold(s, c, -1, 2 * size - 1, &g_ref);
    c = clip(s, c, size, &g_clip);
    if (grad) *grad = mul(s.b, g_ref, g_clip);
    return c;
  }
  if (grad) *grad = s.k(1);
  return c;
}

// Cubic convolution weights (A = -0.75, as PyTorch) of the taps at t + 1, t, 1 - t, 2 - t,
// and their derivatives with respect to t.
void cubic(const Sampler& s, Value t, std::vector<Value>& w, std::vector<Value>& dw) {
  Builder& b = s.b;
  const double A = -0.75;
  auto cc1 = [&](Value x) {  // |x| <= 1
    return add(b, mul(b, mul(b, sub(b, mul(b, s.k(A + 2), x), s.k(A + 3)), x), x), s.k(1));
  };
  auto cc2 = [&](Value x) {  // 1 < |x| < 2
    return sub(b, mul(b, add(b, mul(b, sub(b, mul(b, s.k(A), x), s.k(5 * A)), x), s.k(8 * A)), x), s.k(4 * A));
  };
  auto dcc1 = [&](Value x) { return mul(b, sub(b, mul(b, s.k(3 * (A + 2)), x), s.k(2 * (A + 3))), x); };
  auto dcc2 = [&](Value x) { return add(b, mul(b, sub(b, mul(b, s.k(3 * A), x), s.k(10 * A)), x), s.k(8 * A)); };
  Value t1 = add(b, t, s.k(1)), u = sub(b, s.k(1), t), u1 = sub(b, s.k(2), t);
  w = {cc2(t1), cc1(t), cc1(u), cc2(u1)};
  dw = {dcc2(t1), dcc1(t), neg(b, dcc1(u)), neg(b, dcc2(u1))};
}

// The taps along spatial dim `d` of grid coordinate g ([N, P]); `mult` gets the derivative of
// the tap coordinates' base with respect to g (unnormalization times padding).
std::vector<Tap1> taps_along(const Sampler& s, Value g, int64_t size, Value* mult) {
  Builder& b = s.b;
  double sz = static_cast<double>(size);
  double sc = s.align ? (sz - 1) / 2 : sz / 2;
  Value scale = s.k(sc);
  // The 2-D kernel unnormalizes as g * scale + offset; the 3-D kernel as GridSampler.h writes it.
  Value c = s.n == 2 ? add(b, mul(b, g, scale), s.k(s.align ? sc : sc - 0.5))
            : s.align ? mul(b, div(b, add(b, g, s.k(1)), s.k(2)), s.k(sz - 1))
                      : div(b, sub(b, mul(b, add(b, g, s.k(1)), s.k(sz)), s.k(1)), s.k(2));
  std::vector<Tap1> taps;
  if (s.interp == Interp::Bicubic) {
    *mult = scale;  // the taps' padding moves where they read, not the weights
    Value f = unary(b, Unary::Floor, c);
    std::vector<Value> w, dw;
    cubic(s, sub(b, c, f), w, dw);
    for (int i = 0; i < 4; ++i) {
      Value q = pad_coord(s, add(b, f, s.k(i - 1)), size, nullptr);
      taps.push_back({q, w[i], dw[i]});
    }
    return taps;
  }
  Value pad_grad;
  c = pad_coord(s, c, size, &pad_grad);
  *mult = mul(b, scale, pad_grad);
  if (s.interp == Interp::Nearest) {
    taps.push_back({unary(b, Unary::RoundNearestEven, c), s.k(1), s.k(0)});
    return taps;
  }
  Value f = unary(b, Unary::Floor, c), f1 = add(b, f, s.k(1));
  taps.push_back({f, sub(b, f1, c), s.k(-1)});
  taps.push_back({f1, sub(b, c, f), s.k(1)});
  return taps;
}

// All taps (the product of the per-dim taps) with their flat indices, bounds and weights.
// `mults` gets one coordinate derivative per spatial dim.
std::vector<Tap> all_taps(const Sampler& s, Value grid, std::vector<Value>& mults) {
  Builder& b = s.b;
  int n = s.n;
  Value gflat = reshape(b, convert(b, grid, s.acc), {s.N, s.P, n});
  std::vector<std::vector<Tap1>> per_dim(n);
  mults.assign(n, Value());
  for (int d = 0; d < n; ++d) {
    int comp = n - 1 - d;  // the grid's last dim holds (x, y[, z]): innermost spatial dim first
    Value g = reshape(b, slice(b, gflat, {0, 0, comp}, {s.N, s.P, comp + 1}, {1, 1, 1}), s.np());
    per_dim[d] = taps_along(s, g, s.in[d], &mults[d]);
  }
  std::vector<Tap> taps;
  std::function<void(int, std::vector<int>&)> combine = [&](int d, std::vector<int>& pick) {
    if (d == n) {
      Tap t;
      t.flat = constant(b, 0, DType::S64, s.np());
      t.w = s.k(1);
      int64_t stride = 1;
      for (int e = n - 1; e >= 0; --e) {
        const Tap1& a = per_dim[e][pick[e]];
        // Read as the CPU does: truncate toward zero, in bounds if in [0, size).
        Value inb = s.both(s.gt(a.coord, s.k(-1)), s.lt(a.coord, s.k(static_cast<double>(s.in[e]))));
        Value idx = convert(b, select(b, inb, a.coord, s.k(0)), DType::S64);
        t.flat = add(b, t.flat, mul(b, idx, constant(b, static_cast<double>(stride), DType::S64, s.np())));
        t.inb = t.inb.valid() ? s.both(t.inb, inb) : inb;
        stride *= s.in[e];
      }
      for (int e = 0; e < n; ++e) t.w = mul(b, t.w, per_dim[e][pick[e]].w);
      for (int j = 0; j < n; ++j) {
        Value dw = per_dim[j][pick[j]].dw;
        for (int e = 0; e < n; ++e) if (e != j) dw = mul(b, dw, per_dim[e][pick[e]].w);
        t.dw.push_back(dw);
      }
      taps.push_back(t);
      return;
    }
    for (size_t i = 0; i < per_dim[d].size(); ++i) {
      pick[d] = static_cast<int>(i);
      combine(d + 1, pick);
    }
  };
  std::vector<int> pick(n, 0);
  combine(0, pick);
  return taps;
}

// Stacks [N, P] values of every tap to [N, T, P].
Value stack(const Sampler& s, const std::vector<Value>& vs) {
  std::vector<Value> parts;
  for (const Value& v : vs) parts.push_back(reshape(s.b, v, {s.N, 1, s.P}));
  return concatenate(s.b, parts, 1);
}

// [N, T, P] -> [N, T, P, C]
Value per_channel(const Sampler& s, Value v) {
  std::vector<int64_t> shape = v.shape();
  shape.push_back(s.C);
  return broadcast_in_dim(s.b, v, shape, {0, 1, 2});
}

// The (batch, flat index) pairs of all taps, [N, T * P, 2].
Value tap_indices(const Sampler& s, const std::vector<Tap>& taps) {
  std::vector<Value> flats;
  for (const Tap& t : taps) flats.push_back(t.flat);
  int64_t TP = static_cast<int64_t>(taps.size()) * s.P;
  Value idx = reshape(s.b, stack(s, flats), {s.N, TP, 1});
  return concatenate(s.b, {iota(s.b, Type(DType::S64, {s.N, TP, 1}), 0), idx}, 2);
}

int64_t spatial_numel(const std::vector<int64_t>& v) {
  int64_t n = 1;
  for (int64_t x : v) n *= x;
  return n;
}

// Values of all taps, [N, T, P, C] (out-of-bounds taps read index 0; callers mask them).
Value tap_values(const Sampler& s, Value x, const std::vector<Tap>& taps) {
  Builder& b = s.b;
  int64_t S = spatial_numel(s.in), T = static_cast<int64_t>(taps.size());
  Value xs = transpose(b, reshape(b, convert(b, x, s.acc), {s.N, s.C, S}), {0, 2, 1});
  GatherDims gd;
  gd.offset_dims = {2};
  gd.collapsed_slice_dims = {0, 1};
  gd.start_index_map = {0, 1};
  gd.index_vector_dim = 2;
  Value v = gather(b, xs, tap_indices(s, taps), gd, {1, 1, s.C}, {s.N, T * s.P, s.C});
  return reshape(b, v, {s.N, T, s.P, s.C});
}

// grid_sampler_Nd(input, grid, interpolation_mode, padding_mode, align_corners) and the
// backward's (grad_output, input, grid, ...) share the call's geometry.
Sampler sampler_of(Context& c, size_t x_arg, int n) {
  Value x = c.tensor(x_arg), grid = c.tensor(x_arg + 1);
  require_dtype(is_float(x.dtype()), n == 2 ? "grid_sampler_2d_cpu_kernel_impl" : "grid_sampler3d_cpu", x.dtype());
  if (grid.dtype() != x.dtype()) {
    throw InvalidCall(std::string("expected scalar type ") + torch_name(x.dtype()) + " but found " + torch_name(grid.dtype()));
  }
  for (int64_t d = 2; d < x.rank(); ++d) {
    if (x.shape()[d] == 0) {
      throw InvalidCall("grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes " +
                        shape_str(x.shape()) + " with dimension " + std::to_string(d) + " being empty");
    }
  }
  Interp interp = static_cast<Interp>(c.int_arg(x_arg + 2));
  if (interp == Interp::Bicubic && n == 3) {
    throw InvalidCall("grid_sampler(): bicubic interpolation only supports 4D input");
  }
  Sampler s{c.b, n, interp, static_cast<Padding>(c.int_arg(x_arg + 3)), c.bool_arg(x_arg + 4),
            opmath(x.dtype()), x.shape()[0], x.shape()[1], 1, {}, {}};
  for (int d = 0; d < n; ++d) {
    s.in.push_back(x.shape()[2 + d]);
    s.out.push_back(grid.shape()[1 + d]);
  }
  s.P = spatial_numel(s.out);
  return s;
}

bool empty(const Sampler& s) { return s.N * s.C * s.P == 0 || spatial_numel(s.in) == 0; }

Rule grid_sampler(int n) {
  return [n](Context& c) {
    Builder& b = c.b;
    Sampler s = sampler_of(c, 0, n);
    const Type& out = c.out();
    if (empty(s)) return std::vector<Value>{zeros(b, out)};
    std::vector<Value> mults;
    std::vector<Tap> taps = all_taps(s, c.tensor(1), mults);
    std::vector<Value> ws, inbs;
    for (const Tap& t : taps) {
      ws.push_back(t.w);
      inbs.push_back(t.inb);
    }
    Value v = tap_values(s, c.tensor(0), taps);
    Value w = per_channel(s, stack(s, ws)), inb = per_channel(s, stack(s, inbs));
    Value zero = constant(b, 0, s.acc, v.shape());
    Value terms = n == 2 ? mul(b, select(b, inb, v, zero), w) : select(b, inb, mul(b, v, w), zero);
    Value r = transpose(b, reduce(b, terms, {1}, "add"), {0, 2, 1});  // [N, C, P]
    return std::vector<Value>{convert(b, reshape(b, r, out.shape), out.dtype)};
  };
}

// grid_sampler_Nd_backward(grad_output, input, grid, interpolation_mode, padding_mode,
// align_corners, output_mask) -> (grad_input, grad_grid); masked-off results are dropped.
Rule grid_sampler_backward(int n) {
  return [n](Context& c) {
    Builder& b = c.b;
    Sampler s = sampler_of(c, 1, n);
    const auto& mask = c.ints(6);
    auto on = [&](size_t i) { return i >= mask.size() || mask[i] != 0; };
    std::vector<Value> res{zeros(b, c.out(0)), zeros(b, c.out(1))};
    if (empty(s)) return res;
    std::vector<Value> mults;
    std::vector<Tap> taps = all_taps(s, c.tensor(2), mults);
    int64_t T = static_cast<int64_t>(taps.size());
    std::vector<Value> ws, inbs;
    for (const Tap& t : taps) {
      ws.push_back(t.w);
      inbs.push_back(t.inb);
    }
    Value inb = per_channel(s, stack(s, inbs));
    // grad_output as [N, T, P, C]
    Value go = transpose(b, reshape(b, convert(b, c.tensor(0), s.acc), {s.N, s.C, s.P}), {0, 2, 1});
    go = broadcast_in_dim(b, go, {s.N, T, s.P, s.C}, {0, 2, 3});
    Value zero = constant(b, 0, s.acc, go.shape());
    if (on(0)) {
      Value upd = select(b, inb, mul(b, go, per_channel(s, stack(s, ws))), zero);
      int64_t S = spatial_numel(s.in);
      ScatterDims sd;
      sd.update_window_dims = {2};
      sd.inserted_window_dims = {0, 1};
      sd.scatter_dims_to_operand_dims = {0, 1};
      sd.index_vector_dim = 2;
      Value gi = scatter(b, zeros(b, Type(s.acc, {s.N, S, s.C})), tap_indices(s, taps),
                         reshape(b, upd, {s.N, T * s.P, s.C}), sd, "add");
      gi = transpose(b, gi, {0, 2, 1});
      res[0] = convert(b, reshape(b, gi, c.out(0).shape), c.out(0).dtype);
    }
    if (on(1) && s.interp != Interp::Nearest) {
      Value v = tap_values(s, c.tensor(1), taps);
      std::vector<Value> comps(n);
      for (int d = 0; d < n; ++d) {
        std::vector<Value> dws;
        for (const Tap& t : taps) dws.push_back(t.dw[d]);
        Value gdw = mul(b, go, per_channel(s, stack(s, dws)));
        Value terms = n == 2 ? mul(b, select(b, inb, v, zero), gdw) : select(b, inb, mul(b, v, gdw), zero);
        Value sum = reduce(b, terms, {1, 3}, "add");  // [N, P]
        comps[n - 1 - d] = reshape(b, mul(b, mults[d], sum), {s.N, s.P, 1});
      }
      Value gg = concatenate(b, comps, 2);
      res[1] = convert(b, reshape(b, gg, c.out(1).shape), c.out(1).dtype);
    }
    return res;
  };
}

const Registrar registrar({
    {"grid_sampler_2d", grid_sampler(2)},
    {"grid_sampler_3d", grid_sampler(3)},
    {"grid_sampler_2d_backward", grid_sampler_backward(2)},
    {"grid_sampler_3d_backward", grid_sampler_backward(3)},
});

}  // namespace
}  // namespace tpu::lowering
