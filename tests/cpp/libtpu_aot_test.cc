// Ahead-of-time compilation for TPU topologies through libtpu on a host without a TPU
// (PJRT_TopologyDescription_Create + client-free PJRT_Compile). Skipped unless
// TORCH_TPU_LIBTPU names libtpu.so (pip install libtpu; libtpu/libtpu.so in site-packages).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <iostream>

#include "hlo/builder.h"
#include "hlo/collectives.h"
#include "hlo/ops.h"
#include "pjrt/topology.h"

namespace tpu {
namespace {

std::shared_ptr<pjrt::Api> libtpu() {
  static std::shared_ptr<pjrt::Api> api = [] {
    const char* path = std::getenv("TORCH_TPU_LIBTPU");
    // Without this, PJRT_Plugin_Initialize polls the GCE metadata server and never returns.
    pjrt::prepare_libtpu_offline_env();
    return pjrt::Api::load(path);
  }();
  return api;
}

#define REQUIRE_LIBTPU()                                                         \
  do {                                                                           \
    const char* p = std::getenv("TORCH_TPU_LIBTPU");                             \
    if (p == nullptr || *p == '\0') GTEST_SKIP() << "TORCH_TPU_LIBTPU is unset"; \
  } while (0)

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print_values(const char* what, const std::map<std::string, pjrt::AttributeValue>& props) {
  for (const auto& [name, value] : props) {
    std::cout << "  " << what << "[" << name << "] = ";
    std::visit(
        [](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
            for (size_t i = 0; i < v.size(); ++i) std::cout << (i ? "," : "") << v[i];
          } else {
            std::cout << v;
          }
        },
        value);
    std::cout << "\n";
  }
}

// out = x @ w + b, 256x256 f32.
std::string matmul_add_module(int64_t n) {
  hlo::Builder b;
  hlo::Type t(hlo::DType::F32, {n, n});
  hlo::Value x = b.arg(t), w = b.arg(t), bias = b.arg(t);
  hlo::Value y = hlo::dot_general(b, x, w, {}, {}, {1}, {0}, hlo::DType::F32);
  return b.module({hlo::add(b, y, bias)});
}

TEST(LibtpuAot, PluginAndTopology) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  std::cout << "libtpu PJRT " << api->version_string() << " attributes: "
            << api->attributes_string() << "\n";
  ASSERT_TRUE(api->has(pjrt::abi::kTopologyDescription_Create));
  ASSERT_TRUE(api->has(pjrt::abi::kCompile));
  pjrt::Topology topo(api, "v6e:1x1");
  std::cout << "platform " << topo.platform_name() << " version " << topo.platform_version()
            << "\n";
  EXPECT_EQ(topo.platform_name(), "tpu");
  ASSERT_EQ(topo.devices().size(), 1u);
  EXPECT_EQ(topo.devices()[0].id, 0);
  EXPECT_EQ(topo.devices()[0].kind, "TPU v6 lite");
  auto attributes = topo.attributes();
  print_values("topology", attributes);
  ASSERT_TRUE(attributes.count("device_memory_bytes_limit"));
  EXPECT_GT(std::get<int64_t>(attributes["device_memory_bytes_limit"]), int64_t(30) << 30);  // 32 GB HBM
  EXPECT_FALSE(topo.serialize().empty());

  pjrt::Topology quad(api, "v6e:2x2", {{"chips_per_host_bounds", std::vector<int64_t>{2, 2, 1}}});
  ASSERT_EQ(quad.devices().size(), 4u);
  for (const auto& d : quad.devices()) {
    std::cout << "  v6e:2x2 device id=" << d.id << " kind=" << d.kind
              << " process=" << d.process_index << "\n";
  }
}

TEST(LibtpuAot, BadTopologyNameIsAnError) {
  REQUIRE_LIBTPU();
  try {
    pjrt::Topology topo(libtpu(), "v6e-4");  // slice alias, not "<gen>:<mesh>"
    FAIL() << "expected an error";
  } catch (const pjrt::PjrtError& e) {
    std::cout << "  refused: " << e.what() << "\n";
    EXPECT_NE(std::string(e.what()).find("PJRT_TopologyDescription_Create"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("v6e-4"), std::string::npos);
  }
}

TEST(LibtpuAot, CompileMatmulForV6e) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  pjrt::Topology topo(api, "v6e:1x1");
  pjrt::CompileOptions options;
  options.device_assignment = topo.device_ids();
  auto t0 = std::chrono::steady_clock::now();
  auto exe = pjrt::compile_for_topology(api, topo, matmul_add_module(256), options);
  std::cout << "  compile v6e:1x1 256x256 matmul+add: " << seconds_since(t0) << " s, name "
            << exe->name() << "\n";
  EXPECT_EQ(exe->num_outputs(), 1u);

  auto props = exe->cost_analysis();
  print_values("cost", props);
  auto cost = pjrt::CostSummary::from(props);
  EXPECT_GT(cost.flops, 0);
  EXPECT_GE(cost.flops, 2.0 * 256 * 256 * 256);
  EXPECT_GT(cost.bytes_accessed, 0);

  auto mem = exe->memory_stats();
  std::cout << "  memory: " << mem.to_string() << "\n";
  EXPECT_EQ(mem.argument_size_in_bytes, 3 * 256 * 256 * 4);
  EXPECT_EQ(mem.output_size_in_bytes, 256 * 256 * 4);
  EXPECT_GT(mem.generated_code_size_in_bytes, 0);
  EXPECT_GE(mem.peak_memory_in_bytes, mem.argument_size_in_bytes + mem.output_size_in_bytes);

  t0 = std::chrono::steady_clock::now();
  std::string blob = exe->serialize();
  std::cout << "  serialized " << blob.size() << " bytes in " << seconds_since(t0) << " s\n";
  EXPECT_GT(blob.size(), 0u);
}

// The optimized program names libtpu's 64-bit emulation calls, each of which its cost model
// counts as -1 s (engine/compile/aot_check.cc reads them back).
TEST(LibtpuAot, OptimizedProgramNamesX64EmulationCalls) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  pjrt::Topology topo(api, "v6e:1x1");
  const std::string mlir =
      "func.func @main(%x: tensor<1024x1024xf32>, %s: tensor<i64>) -> tensor<1024x1024xf32> {\n"
      "  %f = stablehlo.convert %s : (tensor<i64>) -> tensor<f32>\n"
      "  %b = stablehlo.broadcast_in_dim %f, dims = [] : (tensor<f32>) -> tensor<1024x1024xf32>\n"
      "  %y = stablehlo.multiply %x, %b : tensor<1024x1024xf32>\n"
      "  return %y : tensor<1024x1024xf32>\n"
      "}\n";
  auto exe = pjrt::compile_for_topology(api, topo, mlir, pjrt::CompileOptions{});
  std::string program = exe->optimized_program();
  ASSERT_FALSE(program.empty());
  size_t calls = 0;
  for (const char* name : {"X64SplitLow", "X64SplitHigh", "X64Combine"}) {
    for (size_t at = program.find(name); at != std::string::npos; at = program.find(name, at + 1)) ++calls;
  }
  EXPECT_GT(calls, 0u);
  auto cost = pjrt::CostSummary::from(exe->cost_analysis());
  std::cout << "  optimized program " << program.size() << " bytes, " << calls
            << " X64 calls, optimal_seconds " << cost.optimal_seconds << "\n";
  // estimate - calls, the estimate being a 4 MiB read plus write (about 5 us on v6e)
  EXPECT_NEAR(cost.optimal_seconds + static_cast<double>(calls), 5.1e-6, 1e-6);
}

TEST(LibtpuAot, HbmOomIsACompileError) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  pjrt::Topology topo(api, "v6e:1x1");
  try {
    // Three 16 GiB arguments and a 16 GiB result do not fit a v6e chip's 32 GB.
    pjrt::compile_for_topology(api, topo, matmul_add_module(65536), pjrt::CompileOptions{});
    FAIL() << "expected an out-of-memory compile error";
  } catch (const pjrt::PjrtError& e) {
    std::cout << "  refused: " << e.what() << "\n";
    EXPECT_EQ(e.code(), pjrt::abi::kResourceExhausted);
  }
}

TEST(LibtpuAot, CompileErrorCarriesMessage) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  pjrt::Topology topo(api, "v6e:1x1");
  try {
    pjrt::compile_for_topology(api, topo, "this is not mlir", pjrt::CompileOptions{});
    FAIL() << "expected an error";
  } catch (const pjrt::PjrtError& e) {
    std::cout << "  refused: " << std::string(e.what()).substr(0, 300) << "\n";
    EXPECT_NE(std::string(e.what()).find("PJRT_Compile"), std::string::npos);
  }
}

TEST(LibtpuAot, CompileSpmdFourPartitionsForV6e2x2) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  pjrt::Topology topo(api, "v6e:2x2");
  ASSERT_EQ(topo.devices().size(), 4u);

  // out[1024,256] = x[1024,256] @ w[256,256] + x, rows of x and out split over 4 devices.
  const std::string rows = "{devices=[4,1]0,1,2,3}";
  hlo::Builder b;
  hlo::Value x = b.arg(hlo::Type(hlo::DType::F32, {1024, 256}), {-1, rows});
  hlo::Value w = b.arg(hlo::Type(hlo::DType::F32, {256, 256}), {-1, "{replicated}"});
  hlo::Value y = hlo::dot_general(b, x, w, {}, {}, {1}, {0}, hlo::DType::F32);
  std::string mlir = b.module({hlo::add(b, y, x)}, /*num_partitions=*/4, {rows});

  pjrt::CompileOptions options;
  options.num_partitions = 4;
  options.use_spmd_partitioning = true;
  options.device_assignment = topo.device_ids();
  auto t0 = std::chrono::steady_clock::now();
  auto exe = pjrt::compile_for_topology(api, topo, mlir, options);
  std::cout << "  compile v6e:2x2 SPMD x4: " << seconds_since(t0) << " s\n";
  EXPECT_EQ(exe->num_partitions(), 4u);
  EXPECT_EQ(exe->num_replicas(), 1u);

  auto props = exe->cost_analysis();
  print_values("cost", props);
  auto cost = pjrt::CostSummary::from(props);
  EXPECT_GT(cost.flops, 0);
  // Per device: a 256x256 @ 256x256 shard, not the whole 1024-row product.
  EXPECT_LT(cost.flops, 2.0 * 1024 * 256 * 256);

  auto mem = exe->memory_stats();
  std::cout << "  per-device memory: " << mem.to_string() << "\n";
  EXPECT_EQ(mem.argument_size_in_bytes, 256 * 256 * 4 + 256 * 256 * 4);  // x shard + w
  EXPECT_EQ(mem.output_size_in_bytes, 256 * 256 * 4);

  std::string blob = exe->serialize();
  std::cout << "  serialized " << blob.size() << " bytes\n";
  EXPECT_GT(blob.size(), 0u);
}


// The collectives tensor parallelism needs, as the SPMD partitioner inserts them from sharding
// annotations, compiled for v6e:2x2 (4 chips): a Llama-8B-sized bf16 projection, 1024 tokens x
// 4096 @ 4096 x 4096. Estimates go to docs/parallel.md.
struct TpCase {
  const char* name;
  std::string x_sharding, w_sharding, out_sharding;
};

TEST(LibtpuAot, TensorParallelCollectivesForV6e2x2) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  pjrt::Topology topo(api, "v6e:2x2");
  ASSERT_EQ(topo.devices().size(), 4u);
  const std::string rows = "{devices=[4,1]0,1,2,3}", cols = "{devices=[1,4]0,1,2,3}", rep = "{replicated}";
  const std::vector<TpCase> cases = {
      {"unsharded (replicated on 4 chips)", rep, rep, rep},
      {"column-parallel, output stays sharded (no collective)", rep, cols, cols},
      {"column-parallel + all-gather of the output", rep, cols, rep},
      {"row-parallel + all-reduce of partial sums", cols, rows, rep},
      {"row-parallel + reduce-scatter (sequence parallel)", cols, rows, rows},
  };
  int accepted = 0;
  for (const TpCase& c : cases) {
    hlo::Builder b;
    hlo::Value x = b.arg(hlo::Type(hlo::DType::BF16, {1024, 4096}), {-1, c.x_sharding});
    hlo::Value w = b.arg(hlo::Type(hlo::DType::BF16, {4096, 4096}), {-1, c.w_sharding});
    hlo::Value y = hlo::dot_general(b, x, w, {}, {}, {1}, {0}, hlo::DType::BF16);
    pjrt::CompileOptions options;
    options.num_partitions = 4;
    options.use_spmd_partitioning = true;
    options.device_assignment = topo.device_ids();
    auto exe = pjrt::compile_for_topology(api, topo, b.module({y}, 4, {c.out_sharding}), options);
    ASSERT_EQ(exe->num_partitions(), 4u) << c.name;
    auto cost = pjrt::CostSummary::from(exe->cost_analysis());
    auto mem = exe->memory_stats();
    std::cout << "  v6e:2x2 " << c.name << ": " << cost.optimal_seconds * 1e6 << " us, " << cost.flops / 1e9
              << " GFLOP and " << cost.bytes_accessed / 1e6 << " MB per chip, arguments "
              << mem.argument_size_in_bytes / 1e6 << " MB, output " << mem.output_size_in_bytes / 1e6 << " MB\n";
    EXPECT_GT(cost.flops, 0) << c.name;
    if (c.w_sharding != rep) {  // each chip holds a quarter of the weight
      EXPECT_LE(mem.argument_size_in_bytes, 1024 * 4096 * 2 + 4096 * 4096 * 2 / 4) << c.name;
    }
    ++accepted;
  }
  std::cout << "  libtpu v6e:2x2 accepted " << accepted << " of " << cases.size() << " tensor-parallel modules\n";
}

// The c10d collectives as a TPU backend would run them: one module per collective, 4 replicas
// on v6e:2x2 (one per chip), libtpu moving the bytes over ICI. A 32 MiB bf16 gradient
// (4096 x 4096), the size DDP all-reduces per bucket for a mid-size layer. Estimates go to
// docs/parallel.md.
TEST(LibtpuAot, C10dCollectiveModulesForV6e2x2) {
  REQUIRE_LIBTPU();
  auto api = libtpu();
  pjrt::Topology topo(api, "v6e:2x2");
  const hlo::ReplicaGroups all4 = {{0, 1, 2, 3}};
  const hlo::Type grad(hlo::DType::BF16, {4096, 4096});
  struct Case {
    const char* name;
    std::function<hlo::Value(hlo::Builder&, hlo::Value)> body;
  };
  const std::vector<Case> cases = {
      {"all_reduce sum", [&](hlo::Builder& b, hlo::Value x) { return hlo::all_reduce(b, x, "add", all4); }},
      {"all_reduce max", [&](hlo::Builder& b, hlo::Value x) { return hlo::all_reduce(b, x, "max", all4); }},
      {"all_gather (dim 0)", [&](hlo::Builder& b, hlo::Value x) { return hlo::all_gather(b, x, 0, all4); }},
      {"reduce_scatter sum (dim 0)",
       [&](hlo::Builder& b, hlo::Value x) { return hlo::reduce_scatter(b, x, 0, "add", all4); }},
      {"all_to_all (dim 0)", [&](hlo::Builder& b, hlo::Value x) { return hlo::all_to_all(b, x, 0, 0, all4); }},
      {"collective_permute (ring)",
       [&](hlo::Builder& b, hlo::Value x) { return hlo::collective_permute(b, x, {{0, 1}, {1, 2}, {2, 3}, {3, 0}}); }},
      {"all_reduce sum, 2 groups of 2",
       [&](hlo::Builder& b, hlo::Value x) { return hlo::all_reduce(b, x, "add", {{0, 1}, {2, 3}}); }},
  };
  int accepted = 0;
  for (const Case& c : cases) {
    hlo::Builder b;
    hlo::Value x = b.arg(grad);
    pjrt::CompileOptions options;
    options.num_replicas = 4;
    options.device_assignment = topo.device_ids();
    auto exe = pjrt::compile_for_topology(api, topo, b.module({c.body(b, x)}, 1, {}, {}, 4), options);
    auto cost = pjrt::CostSummary::from(exe->cost_analysis());
    std::cout << "  v6e:2x2 " << c.name << " of a 32 MiB bf16 tensor: " << cost.optimal_seconds * 1e6 << " us, "
              << cost.bytes_accessed / 1e6 << " MB accessed per chip\n";
    ++accepted;
  }
  std::cout << "  libtpu v6e:2x2 accepted " << accepted << " of " << cases.size() << " collective modules\n";
  EXPECT_EQ(accepted, static_cast<int>(cases.size()));
}

}  // namespace
}  // namespace tpu
