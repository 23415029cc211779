// The lowering table is graph-shaped: one module built from several rules runs as one executable
// (what the torch.compile driver does), without torch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "lowering/registry.h"
#include "program/views.h"
#include "pjrt/client.h"

namespace tpu {
namespace {

pjrt::Client& client() {
  static pjrt::Client c(pjrt::Api::load(std::getenv("TORCH_TPU_TEST_PLUGIN")), {});
  return c;
}

std::vector<lowering::Value> apply(const std::string& op, lowering::Builder& b,
                                   std::vector<lowering::Arg> args, const hlo::Type& out) {
  lowering::Context ctx{b};
  ctx.args = std::move(args);
  ctx.out_types = {out};
  ctx.compute_dtype = out.dtype;
  const lowering::Rule* rule = lowering::find_rule(op);
  if (rule == nullptr) throw std::runtime_error("no rule " + op);
  return (*rule)(ctx);
}

lowering::Arg tensor(lowering::Value v) {
  lowering::Arg a;
  a.kind = lowering::Arg::Kind::Tensor;
  a.tensor = v;
  return a;
}

TEST(LoweringGraph, SeveralRulesOneModule) {
  // y = relu(x * w + b) - computed by three rules in one module.
  lowering::Builder b;
  hlo::Type t(hlo::DType::F32, {4});
  auto x = b.arg(t), w = b.arg(t), bias = b.arg(t);
  auto prod = apply("mul.Tensor", b, {tensor(x), tensor(w)}, t).at(0);
  lowering::Arg none;
  auto sum = apply("add.Tensor", b, {tensor(prod), tensor(bias), none}, t).at(0);
  auto y = apply("relu", b, {tensor(sum)}, t).at(0);
  auto exe = client().compile(b.module({y}), pjrt::CompileOptions{});
  float xs[4] = {1, -2, 3, -4}, ws[4] = {2, 2, 2, 2}, bs[4] = {1, 1, -10, 1};
  auto bx = client().buffer_from_host(xs, pjrt::abi::kF32, {4}, 0);
  auto bw = client().buffer_from_host(ws, pjrt::abi::kF32, {4}, 0);
  auto bb = client().buffer_from_host(bs, pjrt::abi::kF32, {4}, 0);
  auto out = exe->execute({bx->raw(), bw->raw(), bb->raw()});
  float r[4];
  out[0]->to_host(r, sizeof(r));
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(r[i], std::max(0.0f, xs[i] * ws[i] + bs[i]));
}

TEST(LoweringGraph, StridedViewReadAndWrite) {
  // Storage of 12 floats; view = transpose of the 3x4 matrix starting at offset 0.
  lowering::Builder b;
  auto flat = b.arg(hlo::Type(hlo::DType::F32, {12}));
  program::ViewAccess v;
  v.sizes = {4, 3};
  v.strides = {1, 4};
  v.access = program::classify(program::Layout{{12}}, v.sizes, v.strides, 0);
  ASSERT_EQ(v.access, program::Access::Window);
  auto view = program::read_view(b, flat, v);
  auto doubled = hlo::mul(b, view, hlo::constant(b, 2, hlo::DType::F32, {4, 3}));
  auto updated = program::write_view(b, flat, v, doubled);
  auto exe = client().compile(b.module({view, updated}), pjrt::CompileOptions{});
  float data[12];
  for (int i = 0; i < 12; ++i) data[i] = static_cast<float>(i);
  auto buf = client().buffer_from_host(data, pjrt::abi::kF32, {12}, 0);
  auto out = exe->execute({buf->raw()});
  float read[12], written[12];
  out[0]->to_host(read, sizeof(read));
  out[1]->to_host(written, sizeof(written));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_FLOAT_EQ(read[i * 3 + j], data[j * 4 + i]);
  for (int i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(written[i], 2 * data[i]);
}

}  // namespace
}  // namespace tpu
