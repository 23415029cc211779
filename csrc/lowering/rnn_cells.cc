// Fused GRU and LSTM cells. PyTorch's RNN loops (nn.GRU, nn.LSTM, GRUCell, LSTMCell) call
// _thnn_fused_{gru,lstm}_cell for every time step on PrivateUse1 devices, as on CUDA; the CPU has
// no kernel for them, so without these rules the CPU fallback cannot run nn.GRU or nn.LSTM.
//
// The workspace passed from forward to backward is ours to define (only our backward reads it):
//   GRU (B, 5H): r, z, n, hn (hidden n-gate with bias), hx;   LSTM (B, 4H): i, f, g, o.
// Gate order follows PyTorch's weights: GRU r, z, n; LSTM i, f, g, o.
#include <string>
#include <vector>

#include "lowering/math_helpers.h"
#include "lowering/registry.h"

namespace tpu::lowering {
namespace {

using namespace hlo;

// Column block k of width h of a (B, n*h) matrix.
Value block(Builder& b, Value x, int64_t k, int64_t h) {
  return slice(b, x, {0, k * h}, {x.shape()[0], (k + 1) * h}, {1, 1});
}

Value sigmoid(Builder& b, Value x) { return unary(b, Unary::Logistic, x); }
Value tanh_(Builder& b, Value x) { return unary(b, Unary::Tanh, x); }
Value one_minus(Builder& b, Value x) { return sub(b, scalar_like(b, 1, x), x); }

// gates (+ bias broadcast over the batch), in the compute type.
Value gates_with_bias(Context& c, size_t gates, size_t bias, DType t) {
  Value g = convert(c.b, c.tensor(gates), t);
  if (c.has(bias)) g = add(c.b, g, broadcast_in_dim(c.b, convert(c.b, c.tensor(bias), t), g.shape(), {1}));
  return g;
}

void check_gates(Context& c, const char* op, int64_t n) {
  Value ig = c.tensor(0), hg = c.tensor(1), h = c.tensor(2);
  if (ig.rank() != 2 || hg.shape() != ig.shape() || h.rank() != 2 || h.shape()[0] != ig.shape()[0] ||
      ig.shape()[1] != n * h.shape()[1]) {
    throw InvalidCall(std::string(op) + ": gates " + shape_str(ig.shape()) + " and " + shape_str(hg.shape()) +
                      " do not match the hidden state " + shape_str(h.shape()));
  }
  for (size_t bias : {3, 4}) {
    if (c.has(bias) && c.tensor(bias).shape() != std::vector<int64_t>{ig.shape()[1]}) {
      throw InvalidCall(std::string(op) + ": bias of shape " + shape_str(c.tensor(bias).shape()) + ", expected [" +
                        std::to_string(ig.shape()[1]) + "]");
    }
  }
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?, hidden_bias?) -> (hy, workspace)
std::vector<Value> gru_cell(Context& c) {
  Builder& b = c.b;
  check_gates(c, "_thnn_fused_gru_cell", 3);
  DType out = c.tensor(2).dtype(), t = opmath(out);
  int64_t h = c.tensor(2).shape()[1];
  Value ig = gates_with_bias(c, 0, 3, t), hg = gates_with_bias(c, 1, 4, t);
  Value hx = convert(b, c.tensor(2), t);
  Value r = sigmoid(b, add(b, block(b, ig, 0, h), block(b, hg, 0, h)));
  Value z = sigmoid(b, add(b, block(b, ig, 1, h), block(b, hg, 1, h)));
  Value hn = block(b, hg, 2, h);
  Value n = tanh_(b, add(b, block(b, ig, 2, h), mul(b, r, hn)));
  Value hy = add(b, n, mul(b, z, sub(b, hx, n)));
  Value workspace = concatenate(b, {r, z, n, hn, hx}, 1);
  return {convert(b, hy, c.out(0).dtype), convert(b, workspace, c.out(1).dtype)};
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias)
//   -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)
std::vector<Value> gru_cell_backward(Context& c) {
  Builder& b = c.b;
  Value go = c.tensor(0), ws = c.tensor(1);
  if (go.rank() != 2 || ws.rank() != 2 || ws.shape()[1] != 5 * go.shape()[1] || ws.shape()[0] != go.shape()[0]) {
    throw InvalidCall("_thnn_fused_gru_cell_backward: workspace " + shape_str(ws.shape()) +
                      " does not match grad_hy " + shape_str(go.shape()));
  }
  DType out = c.out(0).dtype, t = opmath(out);
  int64_t h = go.shape()[1];
  go = convert(b, go, t);
  ws = convert(b, ws, t);
  Value r = block(b, ws, 0, h), z = block(b, ws, 1, h), n = block(b, ws, 2, h), hn = block(b, ws, 3, h),
        hx = block(b, ws, 4, h);
  Value gz = mul(b, mul(b, mul(b, go, sub(b, hx, n)), one_minus(b, z)), z);
  Value ghx = mul(b, go, z);
  Value gn = mul(b, mul(b, go, one_minus(b, z)), one_minus(b, mul(b, n, n)));
  Value ghn = mul(b, gn, r);
  Value gr = mul(b, mul(b, mul(b, gn, hn), one_minus(b, r)), r);
  Value g_input = concatenate(b, {gr, gz, gn}, 1), g_hidden = concatenate(b, {gr, gz, ghn}, 1);
  std::vector<Value> result{convert(b, g_input, out), convert(b, g_hidden, out), convert(b, ghx, c.out(2).dtype)};
  if (c.bool_arg(2)) {
    result.push_back(convert(b, reduce(b, g_input, {0}, "add"), c.out(3).dtype));
    result.push_back(convert(b, reduce(b, g_hidden, {0}, "add"), c.out(4).dtype));
  } else {
    result.push_back(Value{});
    result.push_back(Value{});
  }
  return result;
}

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?, hidden_bias?) -> (hy, cy, workspace)
std::vector<Value> lstm_cell(Context& c) {
  Builder& b = c.b;
  check_gates(c, "_thnn_fused_lstm_cell", 4);
  DType out = c.tensor(2).dtype(), t = opmath(out);
  int64_t h = c.tensor(2).shape()[1];
  Value gates = add(b, gates_with_bias(c, 0, 3, t), gates_with_bias(c, 1, 4, t));
  Value cx = convert(b, c.tensor(2), t);
  Value i = sigmoid(b, block(b, gates, 0, h)), f = sigmoid(b, block(b, gates, 1, h)),
        g = tanh_(b, block(b, gates, 2, h)), o = sigmoid(b, block(b, gates, 3, h));
  Value cy = add(b, mul(b, f, cx), mul(b, i, g));
  Value hy = mul(b, o, tanh_(b, cy));
  return {convert(b, hy, c.out(0).dtype), convert(b, cy, c.out(1).dtype),
          convert(b, concatenate(b, {i, f, g, o}, 1), c.out(2).dtype)};
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace, has_bias)
//   -> (grad_gates, grad_cx, grad_bias)
std::vector<Value> lstm_cell_backward(Context& c) {
  Builder& b = c.b;
  if (!c.has(0) && !c.has(1)) return {Value{}, Value{}, Value{}};
  Value ws = c.tensor(4);
  DType out = c.out(0).dtype, t = opmath(out);
  int64_t h = c.tensor(2).shape()[1];
  ws = convert(b, ws, t);
  Value cx = convert(b, c.tensor(2), t), cy = convert(b, c.tensor(3), t);
  Value zero = zeros(b, cx.type);
  Value ghy = c.has(0) ? convert(b, c.tensor(0), t) : zero, gcy = c.has(1) ? convert(b, c.tensor(1), t) : zero;
  Value i = block(b, ws, 0, h), f = block(b, ws, 1, h), g = block(b, ws, 2, h), o = block(b, ws, 3, h);
  Value tanh_cy = tanh_(b, cy);
  Value gc = add(b, mul(b, mul(b, ghy, o), one_minus(b, mul(b, tanh_cy, tanh_cy))), gcy);
  Value gi = mul(b, mul(b, mul(b, gc, g), one_minus(b, i)), i);
  Value gf = mul(b, mul(b, mul(b, gc, cx), one_minus(b, f)), f);
  Value gg = mul(b, mul(b, gc, i), one_minus(b, mul(b, g, g)));
  Value go = mul(b, mul(b, mul(b, ghy, tanh_cy), one_minus(b, o)), o);
  Value grad_gates = concatenate(b, {gi, gf, gg, go}, 1);
  Value grad_bias = c.bool_arg(5) ? convert(b, reduce(b, grad_gates, {0}, "add"), c.out(2).dtype) : Value{};
  return {convert(b, grad_gates, out), convert(b, mul(b, gc, f), c.out(1).dtype), grad_bias};
}

const Registrar registrar({
    {"_thnn_fused_gru_cell", gru_cell},
    {"_thnn_fused_gru_cell_backward", gru_cell_backward},
    {"_thnn_fused_lstm_cell", lstm_cell},
    {"_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward},
});

}  // namespace
}  // namespace tpu::lowering
