// tpu_libtpu_compile: compiles StableHLO files ahead of time with libtpu for a TPU topology and
// prints libtpu's verdict and cost analysis for each (estimate, flops, bytes accessed). With
// XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text" libtpu also writes each module before and
// after optimization: what its passes (e.g. the flash-attention rewrite, issue 30) did.
//
// Usage: tpu_libtpu_compile [--libtpu PATH] [--topology v6e:1x1] [--replicas N] FILE.mlir...
//        (--libtpu defaults to $TORCH_TPU_LIBTPU; --replicas N compiles a module with N replicas,
//        e.g. an all-reduce, over the topology's first N devices)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pjrt/topology.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

int main(int argc, char** argv) {
  std::string libtpu = std::getenv("TORCH_TPU_LIBTPU") ? std::getenv("TORCH_TPU_LIBTPU") : "";
  std::string topology_name = "v6e:1x1";
  int replicas = 1;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--libtpu") == 0 && i + 1 < argc) libtpu = argv[++i];
    else if (std::strcmp(argv[i], "--topology") == 0 && i + 1 < argc) topology_name = argv[++i];
    else if (std::strcmp(argv[i], "--replicas") == 0 && i + 1 < argc) replicas = std::atoi(argv[++i]);
    else files.push_back(argv[i]);
  }
  if (libtpu.empty() || files.empty()) {
    std::fprintf(stderr, "usage: %s [--libtpu PATH] [--topology v6e:1x1] [--replicas N] FILE.mlir...\n", argv[0]);
    return 2;
  }
  tpu::pjrt::prepare_libtpu_offline_env();
  auto api = tpu::pjrt::Api::load(libtpu);
  tpu::pjrt::Topology topology(api, topology_name);
  tpu::pjrt::CompileOptions options;
  const auto& ids = topology.device_ids();
  if (replicas < 1 || replicas > static_cast<int>(ids.size())) {
    std::fprintf(stderr, "--replicas %d: topology %s has %zu devices\n", replicas, topology_name.c_str(), ids.size());
    return 2;
  }
  options.num_replicas = replicas;
  options.device_assignment.assign(ids.begin(), ids.begin() + replicas);
  int failures = 0;
  for (const std::string& file : files) {
    try {
      auto exe = tpu::pjrt::compile_for_topology(api, topology, read_file(file), options);
      auto cost = tpu::pjrt::CostSummary::from(exe->cost_analysis());
      std::printf("%s: accepted, estimate %.2f us, %.4g flops, %.4g bytes accessed\n", file.c_str(),
                  cost.optimal_seconds * 1e6, cost.flops, cost.bytes_accessed);
    } catch (const std::exception& e) {
      ++failures;
      std::printf("%s: rejected: %s\n", file.c_str(), first_line(e.what()).c_str());
    }
  }
  return failures == 0 ? 0 : 1;
}
