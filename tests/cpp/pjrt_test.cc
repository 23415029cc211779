// The PJRT layer against the real CPU plugin (path from TORCH_TPU_TEST_PLUGIN).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "hlo/builder.h"
#include "hlo/collectives.h"
#include "hlo/ops.h"
#include "pjrt/client.h"

namespace tpu {
namespace {

std::shared_ptr<pjrt::Api> plugin() {
  static std::shared_ptr<pjrt::Api> api = [] {
    const char* path = std::getenv("TORCH_TPU_TEST_PLUGIN");
    if (path == nullptr || *path == '\0') throw std::runtime_error("set TORCH_TPU_TEST_PLUGIN to a PJRT plugin");
    return pjrt::Api::load(path);
  }();
  return api;
}

pjrt::Client& client() {
  static pjrt::Client c(plugin(), {{"cpu_device_count", int64_t(2)}});
  return c;
}

std::string add_module() {
  hlo::Builder b;
  hlo::Value x = b.arg(hlo::Type(hlo::DType::F32, {2, 3}));
  hlo::Value y = b.arg(hlo::Type(hlo::DType::F32, {2, 3}), {/*alias_output=*/0});
  return b.module({hlo::add(b, x, y)});
}

TEST(Pjrt, LoadsAndReportsVersion) {
  EXPECT_EQ(plugin()->major_version(), 0);
  EXPECT_GE(plugin()->minor_version(), pjrt::kMinSupportedMinor);
  EXPECT_TRUE(plugin()->has(pjrt::abi::kClient_Compile));
  EXPECT_EQ(client().platform_name(), "cpu");
  EXPECT_EQ(client().devices().size(), 2u);
}

TEST(Pjrt, MissingPluginIsAnError) {
  try {
    pjrt::Api::load("/nonexistent/plugin.so");
    FAIL() << "expected an error";
  } catch (const pjrt::PjrtError& e) {
    EXPECT_EQ(e.code(), pjrt::abi::kNotFound);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/plugin.so"), std::string::npos);
  }
}

TEST(Pjrt, CompileExecuteWithDonationAndReadBack) {
  auto exe = client().compile(add_module(), pjrt::CompileOptions{});
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60};
  auto x = client().buffer_from_host(a, pjrt::abi::kF32, {2, 3}, 0);
  auto y = client().buffer_from_host(b, pjrt::abi::kF32, {2, 3}, 0);
  auto out = exe->execute({x->raw(), y->raw()});
  ASSERT_EQ(out.size(), 1u);
  float result[6];
  out[0]->to_host(result, sizeof(result));
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(result[i], a[i] + b[i]);
  EXPECT_TRUE(y->is_deleted());  // donated
  EXPECT_FALSE(x->is_deleted());
}

TEST(Pjrt, CompileErrorCarriesCodeAndMessage) {
  try {
    client().compile("this is not mlir", pjrt::CompileOptions{});
    FAIL() << "expected an error";
  } catch (const pjrt::PjrtError& e) {
    EXPECT_NE(e.code(), pjrt::abi::kOk);
    EXPECT_NE(std::string(e.what()).find("PJRT_Client_Compile"), std::string::npos);
  }
}

TEST(Pjrt, SerializeRoundTrip) {
  auto exe = client().compile(add_module(), pjrt::CompileOptions{});
  std::string bytes = exe->serialize();
  ASSERT_FALSE(bytes.empty());
  auto loaded = client().deserialize(bytes);
  float a[6] = {1, 1, 1, 1, 1, 1};
  auto x = client().buffer_from_host(a, pjrt::abi::kF32, {2, 3}, 0);
  auto y = client().buffer_from_host(a, pjrt::abi::kF32, {2, 3}, 0);
  auto out = loaded->execute({x->raw(), y->raw()});
  float result[6];
  out[0]->to_host(result, sizeof(result));
  EXPECT_FLOAT_EQ(result[5], 2.0f);
}

TEST(Pjrt, SecondDeviceViaDeviceAssignment) {
  pjrt::CompileOptions options;
  options.device_assignment = {client().devices()[1].id};
  auto exe = client().compile(add_module(), options);
  float a[6] = {1, 2, 3, 4, 5, 6};
  auto x = client().buffer_from_host(a, pjrt::abi::kF32, {2, 3}, 1);
  auto y = client().buffer_from_host(a, pjrt::abi::kF32, {2, 3}, 1);
  auto out = exe->execute({x->raw(), y->raw()});
  float result[6];
  out[0]->to_host(result, sizeof(result));
  EXPECT_FLOAT_EQ(result[2], 6.0f);
}

TEST(Pjrt, CompileOptionsBytes) {
  EXPECT_EQ(pjrt::CompileOptions{}.encode(), std::string("\x1a\x04\x20\x01\x28\x01", 6));
  pjrt::CompileOptions spmd;
  spmd.num_partitions = 4;
  spmd.use_spmd_partitioning = true;
  EXPECT_EQ(spmd.encode(), std::string("\x1a\x06\x20\x01\x28\x04\x30\x01", 8));
}

// Cross-replica collectives (hlo/collectives.h) in one executable over the plugin's 2 devices:
// each replica gets its own input and the collectives move the values between them, as libtpu
// does over ICI on a TPU slice. Replica r holds x_r = [1 + 10r, 2 + 10r, 3 + 10r, 4 + 10r].
TEST(Pjrt, CrossReplicaCollectivesOnTwoDevices) {
  const hlo::ReplicaGroups both = {{0, 1}};
  hlo::Builder b;
  hlo::Value x = b.arg(hlo::Type(hlo::DType::F32, {4}));
  std::vector<hlo::Value> results = {
      hlo::all_reduce(b, x, "add", both),
      hlo::all_reduce(b, x, "max", both),
      hlo::all_gather(b, x, 0, both),
      hlo::reduce_scatter(b, x, 0, "add", both),
      hlo::all_to_all(b, x, 0, 0, both),
      hlo::collective_permute(b, x, {{0, 1}}),
  };
  pjrt::CompileOptions options;
  options.num_replicas = 2;
  options.device_assignment = {client().devices()[0].id, client().devices()[1].id};
  auto exe = client().compile(b.module(results, 1, {}, {}, /*num_replicas=*/2), options);
  float in[2][4] = {{1, 2, 3, 4}, {11, 12, 13, 14}};
  auto x0 = client().buffer_from_host(in[0], pjrt::abi::kF32, {4}, 0);
  auto x1 = client().buffer_from_host(in[1], pjrt::abi::kF32, {4}, 1);
  auto out = exe->execute_sharded({{x0->raw()}, {x1->raw()}});
  ASSERT_EQ(out.size(), 2u);
  auto read = [&](int replica, int result, size_t n) {
    std::vector<float> v(n);
    out[replica][result]->to_host(v.data(), n * sizeof(float));
    return v;
  };
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(read(r, 0, 4), (std::vector<float>{12, 14, 16, 18})) << "all_reduce add, replica " << r;
    EXPECT_EQ(read(r, 1, 4), (std::vector<float>{11, 12, 13, 14})) << "all_reduce max, replica " << r;
    EXPECT_EQ(read(r, 2, 8), (std::vector<float>{1, 2, 3, 4, 11, 12, 13, 14})) << "all_gather, replica " << r;
  }
  EXPECT_EQ(read(0, 3, 2), (std::vector<float>{12, 14}));  // reduce_scatter: block r of the sum
  EXPECT_EQ(read(1, 3, 2), (std::vector<float>{16, 18}));
  EXPECT_EQ(read(0, 4, 4), (std::vector<float>{1, 2, 11, 12}));  // all_to_all: block r of everyone
  EXPECT_EQ(read(1, 4, 4), (std::vector<float>{3, 4, 13, 14}));
  EXPECT_EQ(read(0, 5, 4), (std::vector<float>{0, 0, 0, 0}));  // collective_permute 0 -> 1
  EXPECT_EQ(read(1, 5, 4), (std::vector<float>{1, 2, 3, 4}));
}

TEST(Pjrt, CollectiveWithBadSplitIsAnError) {
  hlo::Builder b;
  hlo::Value x = b.arg(hlo::Type(hlo::DType::F32, {3}));
  EXPECT_THROW(hlo::reduce_scatter(b, x, 0, "add", {{0, 1}}), std::invalid_argument);
  EXPECT_THROW(hlo::all_reduce(b, x, "avg", {{0, 1}}), std::invalid_argument);
}

TEST(Pjrt, MemoryStatsUnsupportedOnCpuIsNotAnError) {
  pjrt::MemoryStats stats = client().memory_stats(0);
  EXPECT_FALSE(stats.supported);
}

}  // namespace
}  // namespace tpu
