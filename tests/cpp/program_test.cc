// Program assembles one module from several rules over storages with views, donation and
// device assertions; the module runs on the real CPU plugin (no torch).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "lowering/registry.h"
#include "pjrt/client.h"
#include "program/program.h"

namespace tpu {
namespace {

using program::Access;
using program::DType;
using program::Layout;
using program::Value;

pjrt::Client& client() {
  static pjrt::Client c(pjrt::Api::load(std::getenv("TORCH_TPU_TEST_PLUGIN")), {});
  return c;
}

lowering::Arg tensor(Value v) {
  lowering::Arg a;
  a.kind = lowering::Arg::Kind::Tensor;
  a.tensor = v;
  return a;
}
lowering::Arg integer(int64_t i) {
  lowering::Arg a;
  a.kind = lowering::Arg::Kind::Int;
  a.i = i;
  return a;
}

const lowering::Rule& rule(const std::string& name) {
  const lowering::Rule* r = lowering::find_rule(name);
  if (r == nullptr) throw std::runtime_error("no rule " + name);
  return *r;
}

program::View view(std::vector<int64_t> sizes, std::vector<int64_t> strides, const Layout& layout,
                   int64_t offset, int offset_binding = -1, DType dtype = DType::F32) {
  program::View v;
  v.access = program::classify(layout, sizes, strides, offset);
  v.sizes = std::move(sizes);
  v.strides = std::move(strides);
  v.dtype = dtype;
  v.offset_binding = offset > 0 ? offset_binding : -1;
  return v;
}

std::vector<float> to_host(pjrt::Buffer& b, size_t n) {
  std::vector<float> out(n);
  b.to_host(out.data(), n * sizeof(float));
  return out;
}

TEST(Program, ClassifiesViews) {
  Layout shaped{{4, 6}}, flat{{24}};
  EXPECT_EQ(program::classify(shaped, {4, 6}, {6, 1}, 0), Access::Whole);
  EXPECT_EQ(program::classify(shaped, {24}, {1}, 0), Access::Whole);          // a reshape
  EXPECT_EQ(program::classify(shaped, {6, 4}, {1, 6}, 0), Access::Box);       // transpose
  EXPECT_EQ(program::classify(shaped, {2, 6}, {6, 1}, 6), Access::Box);       // rows 1..2
  EXPECT_EQ(program::classify(shaped, {4, 3}, {6, 2}, 1), Access::Box);       // [:, 1::2]
  EXPECT_EQ(program::classify(shaped, {2, 6}, {6, 1}, 9), Access::Window);    // crosses rows
  EXPECT_EQ(program::classify(flat, {2, 3}, {6, 1}, 14), Access::PaddedWindow);  // window runs past the end
  EXPECT_EQ(program::classify(flat, {3}, {2}, 0), Access::Box);               // flat[::2]
  EXPECT_EQ(program::classify(flat, {3, 3}, {1, 1}, 0), Access::Gather);      // overlapping
  EXPECT_EQ(program::classify(flat, {0, 6}, {6, 1}, 0), Access::Empty);
  // arange(5)[::2]: a box of the flat storage, not a window past its end.
  EXPECT_EQ(program::classify(Layout{{5}}, {3}, {2}, 0), Access::Box);
}

// Storage A: shaped 4x6; storage B: flat 24; storage I: int64 indices [1, 7] (7 is out of range).
//   out0 = A^T @ B.view(4, 6)                     (mm over a transposed box and a whole view)
//   A[1:3] = relu(A[1:3] * 2)                     (write through a runtime-offset box, donated)
//   B[::2] = B[::2] + 1                           (a stepped write into the flat storage)
//   out1 = index_select(A_new, 0, I)              (reads the updated A; I asserts out of range)
TEST(Program, MultiOpModuleWithViewsDonationAndAssertions) {
  Layout a_layout{{4, 6}}, b_layout{{24}}, i_layout{{2}};
  program::Program p("test");
  int a = p.storage({0, DType::F32, a_layout});
  int b = p.storage({1, DType::F32, b_layout});
  int idx = p.storage({2, DType::S64, i_layout});
  EXPECT_EQ(p.storage({0, DType::F32, a_layout}), a);  // de-duplicated by binding

  Value at = p.read(a, view({6, 4}, {1, 6}, a_layout, 0));
  Value bv = p.read(b, view({4, 6}, {6, 1}, b_layout, 0));
  Value mm = p.apply(rule("mm"), {tensor(at), tensor(bv)}, {program::Type(DType::F32, {6, 6})}, DType::F32, {})[0];
  p.output(mm, 0, {0, 1}, program::LayoutPolicy::Shaped);

  program::View rows = view({2, 6}, {6, 1}, a_layout, 6, /*offset_binding=*/0);
  ASSERT_EQ(rows.access, Access::Box);
  Value x = p.read(a, rows);
  lowering::Arg two = tensor(hlo::constant(p.builder(), 2, DType::F32));
  two.is_wrapped_scalar = true;
  Value doubled = p.apply(rule("mul.Tensor"), {tensor(x), two}, {program::Type(DType::F32, {2, 6})}, DType::F32, {})[0];
  Value relu = p.apply(rule("relu"), {tensor(doubled)}, {program::Type(DType::F32, {2, 6})}, DType::F32, {})[0];
  p.write(a, rows, relu);

  program::View even = view({12}, {2}, b_layout, 0);
  Value e = p.read(b, even);
  p.write(b, even, hlo::add(p.builder(), e, hlo::constant(p.builder(), 1, DType::F32, {12})));

  Value a_new = p.read(a, view({4, 6}, {6, 1}, a_layout, 0));
  Value i = p.read(idx, view({2}, {1}, i_layout, 0, -1, DType::S64));
  Value picked = p.apply(rule("index_select"), {tensor(a_new), integer(0), tensor(i)},
                         {program::Type(DType::F32, {2, 6})}, DType::F32, {})[0];
  p.output(picked, 1, {0, 1}, program::LayoutPolicy::Flat);

  program::Module m = p.finish();
  // Parameters: A, B, I, the offset of the rows view.
  ASSERT_EQ(m.params.size(), 4u);
  EXPECT_EQ(m.params[3].kind, program::Param::Kind::Offset);
  EXPECT_EQ(m.params[3].dtype, DType::S32);  // a storage under 2^31 elements: a 32-bit offset
  // Results: two outputs, two written storages (A and B, shaped/flat kept), one assertion.
  ASSERT_EQ(m.results.size(), 5u);
  EXPECT_EQ(m.results[0].layout.dims, (std::vector<int64_t>{6, 6}));
  EXPECT_EQ(m.results[1].layout.dims, (std::vector<int64_t>{12}));
  EXPECT_EQ(m.results[2].kind, program::Result::Kind::Storage);
  EXPECT_EQ(m.results[2].layout.dims, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(m.results[3].layout.dims, (std::vector<int64_t>{24}));
  EXPECT_EQ(m.results[4].kind, program::Result::Kind::Assertion);
  EXPECT_NE(m.text.find("tf.aliasing_output = 2"), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("tf.aliasing_output = 3"), std::string::npos) << m.text;

  auto exe = client().compile(m.text, pjrt::CompileOptions{});
  std::vector<float> A(24), B(24);
  for (int k = 0; k < 24; ++k) {
    A[k] = static_cast<float>(k % 7) - 3;
    B[k] = 0.5f * static_cast<float>(k) - 4;
  }
  for (int64_t bad : {int64_t(7), int64_t(-1), int64_t(3)}) {
    int64_t I[2] = {1, bad};
    auto ba = client().buffer_from_host(A.data(), pjrt::abi::kF32, {4, 6}, 0);
    auto bb = client().buffer_from_host(B.data(), pjrt::abi::kF32, {24}, 0);
    auto bi = client().buffer_from_host(I, pjrt::abi::kS64, {2}, 0);
    int32_t offset = 6;
    auto bo = client().buffer_from_host(&offset, pjrt::abi::kS32, {}, 0);
    auto out = exe->execute({ba->raw(), bb->raw(), bi->raw(), bo->raw()});
    ASSERT_EQ(out.size(), 5u);
    EXPECT_TRUE(ba->is_deleted());  // donated
    EXPECT_TRUE(bb->is_deleted());

    std::vector<float> mm_ref(36, 0), a_ref = A, b_ref = B;
    for (int r = 0; r < 6; ++r)
      for (int c = 0; c < 6; ++c)
        for (int k = 0; k < 4; ++k) mm_ref[r * 6 + c] += A[k * 6 + r] * B[k * 6 + c];
    for (int k = 6; k < 18; ++k) a_ref[k] = std::max(0.0f, 2 * A[k]);
    for (int k = 0; k < 24; k += 2) b_ref[k] += 1;
    auto got_mm = to_host(*out[0], 36);
    for (int k = 0; k < 36; ++k) EXPECT_NEAR(got_mm[k], mm_ref[k], 1e-4) << k;
    EXPECT_EQ(to_host(*out[2], 24), a_ref);
    EXPECT_EQ(to_host(*out[3], 24), b_ref);
    auto got_rows = to_host(*out[1], 12);
    for (int c = 0; c < 6; ++c) EXPECT_EQ(got_rows[c], a_ref[6 + c]);  // row 1 of the new A
    bool failed = false;
    out[4]->to_host(&failed, 1);
    // index_select rejects negative indices like PyTorch's CPU kernel; 3 is in range.
    EXPECT_EQ(failed, bad != 3) << "index " << bad;
  }
}

TEST(Program, UnwrittenStorageNeedsNoParameter) {
  program::Program p("fill");
  program::StorageSlot slot{0, DType::F32, Layout{{2, 3}}, /*unwritten=*/true};
  int s = p.storage(slot);
  Value z = p.read(s, view({2, 3}, {3, 1}, slot.layout, 0));
  p.write(s, view({3}, {1}, slot.layout, 3, 0), hlo::constant(p.builder(), 5, DType::F32, {3}));
  p.output(z, 0, {0, 1}, program::LayoutPolicy::Shaped);
  program::Module m = p.finish();
  ASSERT_EQ(m.params.size(), 1u);  // only the offset
  auto exe = client().compile(m.text, pjrt::CompileOptions{});
  int32_t offset = 3;
  auto bo = client().buffer_from_host(&offset, pjrt::abi::kS32, {}, 0);
  auto out = exe->execute({bo->raw()});
  EXPECT_EQ(to_host(*out[0], 6), std::vector<float>(6, 0));
  EXPECT_EQ(to_host(*out[1], 6), (std::vector<float>{0, 0, 0, 5, 5, 5}));
}

TEST(Program, RuleResultOfTheWrongShapeIsAnError) {
  program::Program p("bad");
  int s = p.storage({0, DType::F32, Layout{{4}}});
  Value x = p.read(s, view({4}, {1}, Layout{{4}}, 0));
  // One result for two declared outputs.
  EXPECT_THROW(p.apply(rule("relu"), {tensor(x)}, {program::Type(DType::F32, {4}), program::Type(DType::F32, {4})},
                       DType::F32, {}),
               program::ProgramError);
  program::View expanded;
  expanded.sizes = {4, 4};
  expanded.strides = {0, 1};
  expanded.access = Access::Box;
  EXPECT_THROW(p.write(s, expanded, hlo::constant(p.builder(), 1, DType::F32, {4, 4})), program::ProgramError);
}

}  // namespace
}  // namespace tpu
