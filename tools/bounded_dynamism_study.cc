// tpu_bounded_dynamism_study: which forms of bounded dynamism the PJRT plugins accept and execute
// (issue 27). Each probe is a hand-written StableHLO module over a capacity of 8 rows whose true
// length n is a runtime i32; it is compiled and run on each CPU plugin given, and compiled
// ahead of time by libtpu for a TPU topology. Printed: accepted or the plugin's message, and the
// values against the exact answer over the first n rows.
//
//   set_dimension_size  XLA's own bounded dynamic shapes (`tensor<?x..., bounds<8>>`): the dynamic
//                       padder is expected to mask reductions and contractions over the dim.
//   static consumer     the same, but the ops after set_dimension_size keep their static types
//                       (what a rule written for static shapes would print).
//   explicit mask       no dynamic types: the rows past n are masked by iota < n (what the growing
//                       dims of the eager engine do); every plugin must accept it.
//
// Usage: tpu_bounded_dynamism_study [--libtpu PATH] [--topology v6e:1x1] [--cpu-plugin PATH]...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "pjrt/client.h"
#include "pjrt/error.h"
#include "pjrt/topology.h"

namespace {

using namespace tpu;

struct Probe {
  const char* name;
  const char* mlir;  // @main(x: f32[8] or f32[8,4], n: i32) -> f32 result(s)
  bool matrix;       // x is f32[8,4] (row dim dynamic), else f32[8]
  // The exact answer over the first n rows, from the host data.
  std::vector<float> (*expected)(const std::vector<float>& x, int n);
};

std::vector<float> sum_first(const std::vector<float>& x, int n) {
  float s = 0;
  for (int i = 0; i < n; ++i) s += x[i];
  return {s};
}

std::vector<float> max_first(const std::vector<float>& x, int n) {
  float m = -INFINITY;
  for (int i = 0; i < n; ++i) m = std::fmax(m, x[i]);
  return {m};
}

// x^T x over the first n rows of an 8x4 matrix: a contraction over the dynamic dim.
std::vector<float> gram_first(const std::vector<float>& x, int n) {
  std::vector<float> g(16, 0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j)
      for (int r = 0; r < n; ++r) g[i * 4 + j] += x[r * 4 + i] * x[r * 4 + j];
  return g;
}

std::vector<float> mean_first(const std::vector<float>& x, int n) {
  return {n == 0 ? NAN : sum_first(x, n)[0] / n};
}

const char* kSumDynamic = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<f32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
    %s = "stablehlo.reduce"(%d, %z) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<?xf32, #stablehlo.bounds<8>>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
})";

const char* kMaxDynamic = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<f32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %z = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %s = "stablehlo.reduce"(%d, %z) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<?xf32, #stablehlo.bounds<8>>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
})";

// The ops after set_dimension_size typed as static (8): does the plugin still mask the reduce?
const char* kSumStaticConsumer = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<f32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %e = "stablehlo.exponential"(%d) : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<8xf32>
    %l = "stablehlo.log"(%e) : (tensor<8xf32>) -> tensor<8xf32>
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
    %s = "stablehlo.reduce"(%l, %z) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
})";

const char* kGramDynamic = R"(
module @probe {
  func.func public @main(%x: tensor<8x4xf32>, %n: tensor<i32>) -> tensor<4x4xf32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8x4xf32>, tensor<i32>) -> tensor<?x4xf32, #stablehlo.bounds<8, ?>>
    %g = "stablehlo.dot_general"(%d, %d) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [0], rhs_contracting_dimensions = [0]>}> : (tensor<?x4xf32, #stablehlo.bounds<8, ?>>, tensor<?x4xf32, #stablehlo.bounds<8, ?>>) -> tensor<4x4xf32>
    return %g : tensor<4x4xf32>
  }
})";

// mean = sum / get_dimension_size: the divisor must come from the runtime size.
const char* kMeanDynamic = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<f32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
    %s = "stablehlo.reduce"(%d, %z) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<?xf32, #stablehlo.bounds<8>>, tensor<f32>) -> tensor<f32>
    %k = "stablehlo.get_dimension_size"(%d) <{dimension = 0 : i64}> : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<i32>
    %kf = "stablehlo.convert"(%k) : (tensor<i32>) -> tensor<f32>
    %m = "stablehlo.divide"(%s, %kf) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %m : tensor<f32>
  }
})";

// No dynamic types: rows past n replaced by the reduction's identity (iota < n).
const char* kSumMasked = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<f32> {
    %i = "stablehlo.iota"() <{iota_dimension = 0 : i64}> : () -> tensor<8xi32>
    %nb = "stablehlo.broadcast_in_dim"(%n) <{broadcast_dimensions = array<i64>}> : (tensor<i32>) -> tensor<8xi32>
    %keep = "stablehlo.compare"(%i, %nb) <{comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
    %zb = "stablehlo.broadcast_in_dim"(%z) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8xf32>
    %m = "stablehlo.select"(%keep, %x, %zb) : (tensor<8xi1>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %s = "stablehlo.reduce"(%m, %z) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
})";

// A dynamic result: what shape does the plugin give the output buffer?
const char* kExpDynamicResult = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %e = "stablehlo.exponential"(%d) : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<?xf32, #stablehlo.bounds<8>>
    return %e : tensor<?xf32, #stablehlo.bounds<8>>
  }
})";

std::vector<float> exp_first(const std::vector<float>& x, int n) {
  std::vector<float> r;
  for (int i = 0; i < n; ++i) r.push_back(std::exp(x[i]));
  return r;
}


// softmax over the dynamic dim, every op after set_dimension_size typed static.
const char* kSoftmaxStatic = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<8xf32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %c = "stablehlo.convert"(%d) : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<8xf32>
    %ninf = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %mx = "stablehlo.reduce"(%c, %ninf) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.maximum"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %mb = "stablehlo.broadcast_in_dim"(%mx) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8xf32>
    %sh = "stablehlo.subtract"(%c, %mb) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %e = "stablehlo.exponential"(%sh) : (tensor<8xf32>) -> tensor<8xf32>
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
    %s = "stablehlo.reduce"(%e, %z) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    %sb = "stablehlo.broadcast_in_dim"(%s) <{broadcast_dimensions = array<i64>}> : (tensor<f32>) -> tensor<8xf32>
    %r = "stablehlo.divide"(%e, %sb) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    return %r : tensor<8xf32>
  }
})";

std::vector<float> softmax_first(const std::vector<float>& x, int n) {
  float m = -INFINITY, s = 0;
  for (int i = 0; i < n; ++i) m = std::fmax(m, x[i]);  // a NaN row makes every result NaN below
  std::vector<float> r;
  bool any_nan = false;
  for (int i = 0; i < n; ++i) any_nan |= std::isnan(x[i]);
  for (int i = 0; i < n; ++i) s += std::exp(x[i] - m);
  for (int i = 0; i < n; ++i) r.push_back(any_nan ? NAN : std::exp(x[i] - m) / s);
  return r;
}

// Merging the dynamic dim with the one after it ([?8, 4] -> [?32]), then a sum.
const char* kReshapeMergeSum = R"(
module @probe {
  func.func public @main(%x: tensor<8x4xf32>, %n: tensor<i32>) -> tensor<f32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8x4xf32>, tensor<i32>) -> tensor<?x4xf32, #stablehlo.bounds<8, ?>>
    %f = "stablehlo.reshape"(%d) : (tensor<?x4xf32, #stablehlo.bounds<8, ?>>) -> tensor<32xf32>
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
    %s = "stablehlo.reduce"(%f, %z) <{dimensions = array<i64: 0>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.add"(%a, %b) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%t) : (tensor<f32>) -> ()
    }) : (tensor<32xf32>, tensor<f32>) -> tensor<f32>
    return %s : tensor<f32>
  }
})";

std::vector<float> sum_first_rows(const std::vector<float>& x, int n) {
  float s = 0;
  for (int i = 0; i < n * 4; ++i) s += x[i];
  return {s};
}

// Ascending sort along the dynamic dim: the first n results are the first n values, sorted.
const char* kSortDynamic = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<8xf32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %s = "stablehlo.sort"(%d) <{dimension = 0 : i64, is_stable = true}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %t = "stablehlo.compare"(%a, %b) <{comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      "stablehlo.return"(%t) : (tensor<i1>) -> ()
    }) : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<8xf32>
    return %s : tensor<8xf32>
  }
})";

std::vector<float> sorted_first(const std::vector<float>& x, int n) {
  std::vector<float> r(x.begin(), x.begin() + n);
  std::stable_sort(r.begin(), r.end(), [](float a, float b) { return a < b; });
  return r;
}

// A runtime-sized result made static again: set_dimension_size back to the bound (a constant).
const char* kExpResetToBound = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<8xf32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %e = "stablehlo.exponential"(%d) : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<8xf32>
    %c = "stablehlo.constant"() <{value = dense<8> : tensor<i32>}> : () -> tensor<i32>
    %s = "stablehlo.set_dimension_size"(%e, %c) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %r = "stablehlo.convert"(%s) : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<8xf32>
    return %r : tensor<8xf32>
  }
})";

// ... or written into zeros by dynamic_update_slice.
const char* kExpUpdateZeros = R"(
module @probe {
  func.func public @main(%x: tensor<8xf32>, %n: tensor<i32>) -> tensor<8xf32> {
    %d = "stablehlo.set_dimension_size"(%x, %n) <{dimension = 0 : i64}> : (tensor<8xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<8>>
    %e = "stablehlo.exponential"(%d) : (tensor<?xf32, #stablehlo.bounds<8>>) -> tensor<8xf32>
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<8xf32>}> : () -> tensor<8xf32>
    %i = "stablehlo.constant"() <{value = dense<0> : tensor<i64>}> : () -> tensor<i64>
    %r = "stablehlo.dynamic_update_slice"(%z, %e, %i) : (tensor<8xf32>, tensor<8xf32>, tensor<i64>) -> tensor<8xf32>
    return %r : tensor<8xf32>
  }
})";

const Probe kProbes[] = {
    {"sum, set_dimension_size", kSumDynamic, false, sum_first},
    {"max, set_dimension_size", kMaxDynamic, false, max_first},
    {"sum, static consumer", kSumStaticConsumer, false, sum_first},
    {"x^T x, set_dimension_size", kGramDynamic, true, gram_first},
    {"mean, get_dimension_size", kMeanDynamic, false, mean_first},
    {"sum, explicit mask", kSumMasked, false, sum_first},
    {"exp, dynamic result", kExpDynamicResult, false, exp_first},
    {"softmax, static consumers", kSoftmaxStatic, false, softmax_first},
    {"[?8,4] -> [32], sum", kReshapeMergeSum, true, sum_first_rows},
    {"sort, set_dimension_size", kSortDynamic, false, sorted_first},
    {"exp, size reset to bound", kExpResetToBound, false, exp_first},
    {"exp, written into zeros", kExpUpdateZeros, false, exp_first},
};

std::string first_line(const std::string& s) {
  std::string line = s.substr(0, s.find('\n'));
  return line.size() > 160 ? line.substr(0, 160) + "..." : line;
}

// Rows 5 and 6 hold NaN and +inf: past n = 3 they are padding, and an op that lets padding
// reach the rows it keeps (a select would not, a multiply by a zero mask would) is visibly wrong.
std::vector<float> data(bool matrix) {
  const size_t cols = matrix ? 4 : 1;
  std::vector<float> x(8 * cols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f + 0.25f * static_cast<float>(i % 7);
  for (size_t c = 0; c < cols; ++c) {
    x[5 * cols + c] = NAN;
    x[6 * cols + c] = INFINITY;
  }
  return x;
}

void run_on_cpu_plugin(const std::string& path) {
  std::printf("== CPU plugin %s\n", path.c_str());
  auto api = pjrt::Api::load(path);
  pjrt::Client client(api, {});
  std::printf("   PJRT %s, platform %s %s\n", api->version_string().c_str(), client.platform_name().c_str(),
              client.platform_version().c_str());
  for (const Probe& p : kProbes) {
    std::printf("  %-28s ", p.name);
    std::unique_ptr<pjrt::Executable> exe;
    try {
      exe = client.compile(p.mlir, pjrt::CompileOptions{});
    } catch (const std::exception& e) {
      std::printf("rejected: %s\n", first_line(e.what()).c_str());
      continue;
    }
    std::vector<float> x = data(p.matrix);
    std::string verdict = "exact";
    for (int n : {0, 1, 3, 5, 8}) {
      try {
        auto xb = client.buffer_from_host(x.data(), pjrt::abi::kF32,
                                          p.matrix ? std::vector<int64_t>{8, 4} : std::vector<int64_t>{8}, 0);
        int32_t nn = n;
        auto nb = client.buffer_from_host(&nn, pjrt::abi::kS32, {}, 0);
        auto out = exe->execute({xb->raw(), nb->raw()});
        std::vector<int64_t> dims = out[0]->dimensions();
        std::vector<float> want = p.expected(x, n);
        size_t count = 1;
        for (int64_t d : dims) count *= static_cast<size_t>(d);
        std::vector<float> got(count);
        if (count) out[0]->to_host(got.data(), count * sizeof(float));
        bool ok = got.size() >= want.size();
        for (size_t i = 0; ok && i < want.size(); ++i) {
          ok = (std::isnan(want[i]) && std::isnan(got[i])) || got[i] == want[i] || std::fabs(got[i] - want[i]) <= 1e-5f * (1 + std::fabs(want[i]));
        }
        std::string shape;
        for (int64_t d : dims) shape += std::to_string(d) + ",";
        if (!ok) {
          verdict = "WRONG at n=" + std::to_string(n) + " (got " + std::to_string(got.empty() ? NAN : got[0]) +
                    ", want " + std::to_string(want.empty() ? NAN : want[0]) + ", result dims [" + shape + "])";
          break;
        }
        if (got.size() != want.size()) verdict = "exact over the first n, result dims [" + shape + "] (padded)";
        if (dims == std::vector<int64_t>{8}) {
          // Does a static executable take the result buffer (or is it dynamic-shaped)?
          try {
            auto consumer = client.compile(kSumMasked, pjrt::CompileOptions{});
            consumer->execute({out[0]->raw(), nb->raw()});
            if (n == 8) verdict += ", static buffer";
          } catch (const std::exception& e) {
            verdict += ", DYNAMIC buffer (a static executable refuses it)";
            break;
          }
        }
      } catch (const std::exception& e) {
        verdict = "execute failed at n=" + std::to_string(n) + ": " + first_line(e.what());
        break;
      }
    }
    std::printf("%s\n", verdict.c_str());
  }
}

void compile_with_libtpu(const std::string& path, const std::string& topology_name) {
  std::printf("== libtpu %s, topology %s (ahead of time)\n", path.c_str(), topology_name.c_str());
  pjrt::prepare_libtpu_offline_env();
  auto api = pjrt::Api::load(path);
  pjrt::Topology topology(api, topology_name);
  pjrt::CompileOptions options;
  options.device_assignment = {topology.device_ids().at(0)};
  for (const Probe& p : kProbes) {
    std::printf("  %-28s ", p.name);
    try {
      auto exe = pjrt::compile_for_topology(api, topology, p.mlir, options);
      pjrt::CostSummary cost = pjrt::CostSummary::from(exe->cost_analysis());
      std::printf("accepted (estimate %.3g us)\n", cost.optimal_seconds * 1e6);
    } catch (const std::exception& e) {
      std::printf("rejected: %s\n", first_line(e.what()).c_str());
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string libtpu = std::getenv("TORCH_TPU_LIBTPU") ? std::getenv("TORCH_TPU_LIBTPU") : "";
  std::string topology = "v6e:1x1";
  std::vector<std::string> cpu_plugins;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--libtpu") == 0) libtpu = argv[i + 1];
    else if (std::strcmp(argv[i], "--topology") == 0) topology = argv[i + 1];
    else if (std::strcmp(argv[i], "--cpu-plugin") == 0) cpu_plugins.push_back(argv[i + 1]);
  }
  for (const std::string& p : cpu_plugins) {
    try {
      run_on_cpu_plugin(p);
    } catch (const std::exception& e) {
      std::printf("  plugin failed: %s\n", e.what());
    }
  }
  if (!libtpu.empty()) {
    try {
      compile_with_libtpu(libtpu, topology);
    } catch (const std::exception& e) {
      std::printf("  libtpu failed: %s\n", e.what());
    }
  }
  return 0;
}
