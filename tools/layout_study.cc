// tpu_layout_study: how the layout of @main's parameters and results changes libtpu's estimated
// device time for common ops (docs/layout.md). No TPU needed: each module is compiled ahead of
// time for a topology (default "v6e:1x1") and PJRT_Executable_GetCostAnalysis is read back.
//
// Every workload is built in three variants:
//   flat    every parameter is a 1-D tensor<N x dtype> reshaped to its N-D shape inside the module,
//           every result is reshaped to 1-D (what the engine does today with storages);
//   shaped  parameters and results have their N-D shapes;
//   auto    shaped, plus mhlo.layout_mode = "auto" on every parameter and result (as JAX emits
//           it), letting the compiler choose the device layouts.
//
// Usage: tpu_layout_study [--libtpu PATH] [--topology v6e:1x1] [--only SUBSTRING]
//                         [--dump DIR] [--cpu-plugin PATH]...
//   --libtpu      libtpu.so (default: $TORCH_TPU_LIBTPU)
//   --dump        write each variant's MLIR to DIR/<workload>.<variant>.mlir
//   --hlo DIR     write each variant's optimized program (PJRT_Executable_OptimizedProgram,
//                 a serialized HloModuleProto) to DIR/<workload>.<variant>.hlo.pb
//   --props       print every cost-analysis property of every compiled variant (stderr)
//   --cpu-plugin  also compile the matmul variants with this PJRT CPU plugin through a client
//                 (does it accept mhlo.layout_mode = "auto"?); may be repeated
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "hlo/builder.h"
#include "hlo/ops.h"
#include "pjrt/client.h"
#include "pjrt/error.h"
#include "pjrt/topology.h"

namespace {

using namespace tpu;
using hlo::DType;
using hlo::Type;
using hlo::Value;

enum class Variant { Flat, Shaped, Auto };
const char* variant_name(Variant v) {
  return v == Variant::Flat ? "flat" : v == Variant::Shaped ? "shaped" : "auto";
}

// Builds one variant of a workload: parameters and results go through param()/finish(), which
// apply the variant's layout convention; the body in between always sees N-D values.
class Module {
 public:
  explicit Module(Variant v) : variant_(v) {}
  hlo::Builder& b() { return b_; }

  Value param(const Type& t) {
    if (variant_ == Variant::Flat && t.rank() != 1) {
      return hlo::reshape(b_, b_.arg(Type(t.dtype, {t.numel()})), t.shape);
    }
    hlo::ArgOptions options;
    if (variant_ == Variant::Auto) options.layout_mode = "auto";
    return b_.arg(t, options);
  }

  std::string finish(std::vector<Value> results) {
    std::vector<std::string> layout_modes;
    for (Value& r : results) {
      if (variant_ == Variant::Flat && r.rank() != 1) r = hlo::reshape(b_, r, {r.type.numel()});
      layout_modes.push_back(variant_ == Variant::Auto ? "auto" : "");
    }
    return b_.module(results, 1, {}, layout_modes);
  }

 private:
  Variant variant_;
  hlo::Builder b_;
};

struct Workload {
  std::string name, dtype, shapes;
  std::function<std::string(Variant)> build;
};

std::string dims_str(const std::vector<int64_t>& s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "x" : "") + std::to_string(s[i]);
  return r;
}

DType acc(DType t) { return t == DType::BF16 || t == DType::F16 ? DType::F32 : t; }

// ---- workloads --------------------------------------------------------------------------------

// [.., m, k] @ [.., k, n] with the leading dims as batch dims (torch.matmul of equal ranks).
Workload matmul(DType dt, std::vector<int64_t> a, std::vector<int64_t> w, std::string name) {
  std::string shapes = dims_str(a) + " @ " + dims_str(w);
  return {name, hlo::mlir_name(dt), shapes, [=](Variant v) {
            Module m(v);
            Value x = m.param(Type(dt, a)), y = m.param(Type(dt, w));
            std::vector<int64_t> batch;
            for (int64_t i = 0; i + 2 < static_cast<int64_t>(a.size()); ++i) batch.push_back(i);
            int64_t r = static_cast<int64_t>(a.size());
            return m.finish({hlo::dot_general(m.b(), x, y, batch, batch, {r - 1}, {r - 2}, dt)});
          }};
}

// F.linear without bias: x [m, k] . w [n, k] (PyTorch's Linear weight layout) -> [m, n].
Workload linear(DType dt, int64_t m_, int64_t k, int64_t n) {
  return {"linear x @ w.T", hlo::mlir_name(dt),
          dims_str({m_, k}) + " @ (" + dims_str({n, k}) + ").T", [=](Variant v) {
            Module m(v);
            Value x = m.param(Type(dt, {m_, k})), w = m.param(Type(dt, {n, k}));
            return m.finish({hlo::dot_general(m.b(), x, w, {}, {}, {1}, {1}, dt)});
          }};
}

Workload transpose2d(DType dt, int64_t rows, int64_t cols) {
  return {"transpose", hlo::mlir_name(dt),
          dims_str({rows, cols}) + " -> " + dims_str({cols, rows}), [=](Variant v) {
            Module m(v);
            Value x = m.param(Type(dt, {rows, cols}));
            return m.finish({hlo::transpose(m.b(), x, {1, 0})});
          }};
}

// softmax over the last dim in float32 (PyTorch's bf16 softmax accumulates in f32).
Value softmax_last(hlo::Builder& b, Value s) {
  DType dt = s.dtype();
  std::vector<int64_t> shape = s.shape();
  int64_t last = s.rank() - 1;
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < last; ++i) kept.push_back(i);
  Value x = hlo::convert(b, s, acc(dt));
  Value mx = hlo::reduce(b, x, {last}, "max");
  Value e = hlo::unary(b, hlo::Unary::Exponential,
                       hlo::sub(b, x, hlo::broadcast_in_dim(b, mx, shape, kept)));
  Value sum = hlo::reduce(b, e, {last}, "add");
  Value p = hlo::div(b, e, hlo::broadcast_in_dim(b, sum, shape, kept));
  return hlo::convert(b, p, dt);
}

// softmax(q @ k^T * scale) @ v with q, k, v [B, H, S, D].
Workload attention(DType dt, int64_t B, int64_t H, int64_t S, int64_t D) {
  std::vector<int64_t> qs{B, H, S, D};
  return {"attention (scores, softmax, @v)", hlo::mlir_name(dt), "q,k,v " + dims_str(qs),
          [=](Variant v) {
            Module m(v);
            hlo::Builder& b = m.b();
            Value q = m.param(Type(dt, qs)), k = m.param(Type(dt, qs)), vv = m.param(Type(dt, qs));
            Value s = hlo::dot_general(b, q, k, {0, 1}, {0, 1}, {3}, {3}, dt);  // [B,H,S,S]
            s = hlo::mul(b, s, hlo::constant(b, 1.0 / std::sqrt(double(D)), dt, s.shape()));
            Value p = softmax_last(b, s);
            return m.finish({hlo::dot_general(b, p, vv, {0, 1}, {0, 1}, {3}, {2}, dt)});
          }};
}

// Layer norm (rms=false) or RMSNorm (rms=true, no mean, no bias) over the last dim, in f32.
Workload norm(DType dt, int64_t rows, int64_t cols, bool rms) {
  return {rms ? "RMSNorm (weight)" : "layer norm (weight, bias)", hlo::mlir_name(dt),
          dims_str({rows, cols}) + (rms ? ", w " : ", w,b ") + std::to_string(cols), [=](Variant v) {
            Module m(v);
            hlo::Builder& b = m.b();
            Value x = m.param(Type(dt, {rows, cols}));
            Value w = m.param(Type(dt, {cols}));
            Value bias = rms ? Value{} : m.param(Type(dt, {cols}));
            DType a = acc(dt);
            std::vector<int64_t> shape{rows, cols};
            x = hlo::convert(b, x, a);
            auto back = [&](Value r) { return hlo::broadcast_in_dim(b, r, shape, {0}); };
            auto mean_of = [&](Value t) {
              return hlo::div(b, hlo::reduce(b, t, {1}, "add"),
                              hlo::constant(b, double(cols), a, {rows}));
            };
            Value d = x;
            if (!rms) d = hlo::sub(b, x, back(mean_of(x)));
            Value var = mean_of(hlo::mul(b, d, d));
            Value rstd = hlo::unary(b, hlo::Unary::Rsqrt,
                                    hlo::add(b, var, hlo::constant(b, 1e-5, a, {rows})));
            Value y = hlo::mul(b, d, back(rstd));
            y = hlo::mul(b, y, hlo::broadcast_in_dim(b, hlo::convert(b, w, a), shape, {1}));
            if (!rms) {
              y = hlo::add(b, y, hlo::broadcast_in_dim(b, hlo::convert(b, bias, a), shape, {1}));
            }
            return m.finish({hlo::convert(b, y, dt)});
          }};
}

// conv2d NCHW x OIHW, stride 1, symmetric padding, attribute syntax as csrc/lowering/conv.cc.
Workload conv2d(DType dt, int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k,
                int64_t pad) {
  return {"conv2d NCHW, pad " + std::to_string(pad), hlo::mlir_name(dt),
          dims_str({n, c, h, w}) + " * " + dims_str({o, c, k, k}), [=](Variant v) {
            Module m(v);
            Value x = m.param(Type(dt, {n, c, h, w}));
            Value kern = m.param(Type(dt, {o, c, k, k}));
            std::string pads = "dense<[[" + std::to_string(pad) + ", " + std::to_string(pad) +
                               "], [" + std::to_string(pad) + ", " + std::to_string(pad) +
                               "]]> : tensor<2x2xi64>";
            std::string attrs =
                "dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, "
                "window_strides = " + hlo::i64_array({1, 1}) + ", padding = " + pads +
                ", lhs_dilation = " + hlo::i64_array({1, 1}) +
                ", rhs_dilation = " + hlo::i64_array({1, 1}) +
                ", feature_group_count = 1 : i64, batch_group_count = 1 : i64";
            if (dt == DType::F32) {
              attrs += ", precision_config = [#stablehlo<precision HIGHEST>, "
                       "#stablehlo<precision HIGHEST>]";
            }
            int64_t oh = h + 2 * pad - k + 1, ow = w + 2 * pad - k + 1;
            Value y = m.b().emit1("stablehlo.convolution", {x, kern}, Type(dt, {n, o, oh, ow}), attrs);
            return m.finish({y});
          }};
}

// table[idx] for idx [rows] (torch.embedding): gather of whole rows.
Workload embedding(DType dt, int64_t vocab, int64_t dim, int64_t rows) {
  return {"embedding (gather rows)", hlo::mlir_name(dt),
          dims_str({vocab, dim}) + "[" + std::to_string(rows) + " x i32]", [=](Variant v) {
            Module m(v);
            Value table = m.param(Type(dt, {vocab, dim}));
            Value idx = m.param(Type(DType::S32, {rows}));
            hlo::GatherDims d;
            d.offset_dims = {1};
            d.collapsed_slice_dims = {0};
            d.start_index_map = {0};
            d.index_vector_dim = 1;
            return m.finish({hlo::gather(m.b(), table, idx, d, {1, dim}, {rows, dim})});
          }};
}

Workload add2d(DType dt, int64_t rows, int64_t cols) {
  return {"elementwise add", hlo::mlir_name(dt),
          dims_str({rows, cols}) + " + " + dims_str({rows, cols}), [=](Variant v) {
            Module m(v);
            Value x = m.param(Type(dt, {rows, cols})), y = m.param(Type(dt, {rows, cols}));
            return m.finish({hlo::add(m.b(), x, y)});
          }};
}

// sum over the last dim, accumulated in f32 like PyTorch's bf16 sum.
Workload sum_last(DType dt, int64_t rows, int64_t cols) {
  return {"sum over last dim", hlo::mlir_name(dt),
          dims_str({rows, cols}) + " -> " + std::to_string(rows), [=](Variant v) {
            Module m(v);
            hlo::Builder& b = m.b();
            Value x = hlo::convert(b, m.param(Type(dt, {rows, cols})), acc(dt));
            return m.finish({hlo::convert(b, hlo::reduce(b, x, {1}, "add"), dt)});
          }};
}

// A decode token's SwiGLU MLP as one module, down(silu(x . gate.T) * (x . up.T)) (Llama's MLP):
// compiled whole, libtpu reads the weights more than once (docs/compile.md, Measured), unlike
// each product alone.
Workload swiglu_mlp(DType dt, int64_t k, int64_t n) {
  return {"decode SwiGLU MLP", hlo::mlir_name(dt),
          dims_str({1, k}) + ", gate/up " + dims_str({n, k}) + ", down " + dims_str({k, n}), [=](Variant v) {
            Module m(v);
            Value x = m.param(Type(dt, {1, k})), gate = m.param(Type(dt, {n, k})), up = m.param(Type(dt, {n, k}));
            Value down = m.param(Type(dt, {k, n}));
            Value g = hlo::dot_general(m.b(), x, gate, {}, {}, {1}, {1}, dt);
            Value u = hlo::dot_general(m.b(), x, up, {}, {}, {1}, {1}, dt);
            Value act = hlo::mul(m.b(), hlo::mul(m.b(), g, hlo::unary(m.b(), hlo::Unary::Logistic, g)), u);
            return m.finish({hlo::dot_general(m.b(), act, down, {}, {}, {1}, {1}, dt)});
          }};
}

std::vector<Workload> workloads() {
  const DType bf = DType::BF16, f32 = DType::F32;
  return {
      matmul(bf, {1024, 1024}, {1024, 1024}, "matmul"),
      matmul(f32, {1024, 1024}, {1024, 1024}, "matmul"),
      matmul(bf, {1, 4096}, {4096, 4096}, "decode matmul"),
      matmul(bf, {8, 4096}, {4096, 11008}, "decode matmul"),
      linear(bf, 1, 4096, 4096),
      linear(bf, 8, 4096, 11008),
      swiglu_mlp(bf, 4096, 11008),
      matmul(bf, {16, 1024, 64}, {16, 64, 1024}, "bmm attention scores"),
      matmul(bf, {16, 1024, 1024}, {16, 1024, 64}, "bmm attention x values"),
      transpose2d(bf, 4096, 64),
      attention(bf, 1, 16, 1024, 64),
      norm(bf, 4096, 1024, false),
      norm(bf, 4096, 1024, true),
      conv2d(bf, 1, 64, 64, 64, 64, 3, 1),
      embedding(bf, 32000, 1024, 128),
      add2d(bf, 4096, 1024),
      sum_last(bf, 4096, 1024),
      // Small minor dims (padded to 128 lanes in a shaped TPU layout).
      add2d(bf, 4096, 64),
      add2d(f32, 65536, 3),
      sum_last(f32, 65536, 3),
  };
}

// ---- measurement ------------------------------------------------------------------------------

struct Result {
  bool ok = false;
  std::string error;
  pjrt::CostSummary cost;
  pjrt::CompiledMemoryStats mem;
};

std::string first_line(const std::string& s, size_t max = 200) {
  std::string r = s.substr(0, s.find('\n'));
  return r.size() > max ? r.substr(0, max) + "..." : r;
}

std::string fmt(double v, int prec = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

std::string us(const Result& r) {
  if (!r.ok) return "refused";
  if (r.cost.optimal_seconds < 0) return "n/a";
  return fmt(r.cost.optimal_seconds * 1e6, 1);
}

std::string count(double v) {
  if (v < 0) return "n/a";
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return fmt(v, v < 10 && u > 0 ? 2 : (u > 0 ? 1 : 0)) + units[u];
}

std::string bytes(double v) {
  if (v < 0) return "n/a";
  if (v >= 1 << 20) return fmt(v / (1 << 20), 2) + " MiB";
  if (v >= 1 << 10) return fmt(v / (1 << 10), 1) + " KiB";
  return fmt(v, 0) + " B";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

// PJRT_Executable_OptimizedProgram (slot 48, between OutputMemoryKinds and Serialize): the
// compiled HloModuleProto. Called twice: code == nullptr asks for the size.
std::string optimized_program(const pjrt::Api& api, pjrt::abi::Executable* exe) {
  struct Args {
    size_t struct_size;
    pjrt::abi::ExtensionBase* extension_start;
    pjrt::abi::Executable* executable;
    pjrt::abi::Program* program;
  };
  const auto slot = static_cast<pjrt::abi::Slot>(48);
  pjrt::abi::Program program{};
  program.struct_size = TPU_PJRT_STRUCT_SIZE(pjrt::abi::Program, format_size);
  Args args{sizeof(Args), nullptr, exe, &program};
  api.call(slot, &args, "PJRT_Executable_OptimizedProgram");
  std::string code(program.code_size, '\0');
  program.code = code.data();
  api.call(slot, &args, "PJRT_Executable_OptimizedProgram");
  return code;
}

int run(int argc, char** argv) {
  std::string libtpu_path = std::getenv("TORCH_TPU_LIBTPU") ? std::getenv("TORCH_TPU_LIBTPU") : "";
  std::string topology_name = "v6e:1x1", only, dump, hlo_dir;
  bool props = false;
  std::vector<std::string> cpu_plugins;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--libtpu") libtpu_path = next();
    else if (a == "--topology") topology_name = next();
    else if (a == "--only") only = next();
    else if (a == "--dump") dump = next();
    else if (a == "--props") props = true;
    else if (a == "--hlo") hlo_dir = next();
    else if (a == "--cpu-plugin") cpu_plugins.push_back(next());
    else throw std::invalid_argument("unknown option " + a + " (see tools/layout_study.cc)");
  }
  if (libtpu_path.empty()) throw std::invalid_argument("pass --libtpu or set TORCH_TPU_LIBTPU");

  pjrt::prepare_libtpu_offline_env();
  std::shared_ptr<pjrt::Api> api = pjrt::Api::load(libtpu_path);
  pjrt::Topology topo(api, topology_name);
  pjrt::CompileOptions options;
  options.device_assignment = topo.device_ids();
  std::string version = topo.platform_version();
  for (char& ch : version) {
    if (ch == '\n') ch = ' ';
  }
  std::cout << "libtpu " << version << ", PJRT " << api->version_string()
            << ", topology " << topology_name << " (" << topo.devices().at(0).kind << ")\n\n";

  const Variant variants[] = {Variant::Flat, Variant::Shaped, Variant::Auto};
  struct Row {
    Workload w;
    Result r[3];
  };
  std::vector<Row> rows;
  std::vector<std::string> notes;
  for (const Workload& w : workloads()) {
    std::string label = w.name + " " + w.dtype + " " + w.shapes;
    if (!only.empty() && label.find(only) == std::string::npos) continue;
    Row row{w, {}};
    for (int vi = 0; vi < 3; ++vi) {
      std::string mlir = w.build(variants[vi]);
      std::string file = label;
      for (char& ch : file) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      file += std::string(".") + variant_name(variants[vi]);
      if (!dump.empty()) write_file(dump + "/" + file + ".mlir", mlir);
      Result& r = row.r[vi];
      try {
        auto exe = pjrt::compile_for_topology(api, topo, mlir, options);
        auto properties = exe->cost_analysis();
        r.cost = pjrt::CostSummary::from(properties);
        if (props) {
          for (const auto& [name, value] : properties) {
            std::cerr << "    " << variant_name(variants[vi]) << " [" << name << "] = ";
            std::visit(
                [](const auto& x) {
                  using T = std::decay_t<decltype(x)>;
                  if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                    for (size_t i = 0; i < x.size(); ++i) std::cerr << (i ? "," : "") << x[i];
                  } else {
                    std::cerr << x;
                  }
                },
                value);
            std::cerr << "\n";
          }
        }
        r.mem = exe->memory_stats();
        r.ok = true;
        if (!hlo_dir.empty()) write_file(hlo_dir + "/" + file + ".hlo.pb", optimized_program(*api, exe->raw()));
      } catch (const std::exception& e) {
        r.error = e.what();
        notes.push_back(label + " [" + variant_name(variants[vi]) + "]: " + first_line(r.error, 600));
      }
      std::cerr << "  " << label << " [" << variant_name(variants[vi]) << "] " << us(r) << " us\n";
    }
    rows.push_back(std::move(row));
  }

  std::cout << "| workload | dtype | shapes | est. us flat | shaped | auto | flops | bytes accessed "
               "flat | shaped | auto | best |\n";
  std::cout << "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const Row& row : rows) {
    // best: lowest estimate; within 2% of the lowest counts as a tie.
    double lo = -1;
    for (const Result& r : row.r) {
      if (r.ok && r.cost.optimal_seconds >= 0 && (lo < 0 || r.cost.optimal_seconds < lo)) {
        lo = r.cost.optimal_seconds;
      }
    }
    std::string best;
    for (int vi = 0; vi < 3; ++vi) {
      const Result& r = row.r[vi];
      if (lo >= 0 && r.ok && r.cost.optimal_seconds >= 0 && r.cost.optimal_seconds <= lo * 1.02) {
        best += std::string(best.empty() ? "" : " = ") + variant_name(variants[vi]);
      }
    }
    if (best.empty()) best = "n/a";
    const Result& shaped = row.r[1];
    double flops = shaped.ok ? shaped.cost.flops : row.r[0].cost.flops;
    std::cout << "| " << row.w.name << " | " << row.w.dtype << " | " << row.w.shapes << " | "
              << us(row.r[0]) << " | " << us(row.r[1]) << " | " << us(row.r[2]) << " | "
              << count(flops) << " | "
              << (row.r[0].ok ? bytes(row.r[0].cost.bytes_accessed) : "-") << " | "
              << (row.r[1].ok ? bytes(row.r[1].cost.bytes_accessed) : "-") << " | "
              << (row.r[2].ok ? bytes(row.r[2].cost.bytes_accessed) : "-") << " | " << best
              << " |\n";
  }

  // Compiled memory stats: the device buffers' sizes include the TPU tiling padding of the
  // parameter/result layouts, which cost analysis does not show directly.
  std::cout << "\nCompiled argument / output / temp bytes (PJRT_Executable_GetCompiledMemoryStats):\n\n";
  std::cout << "| workload | dtype | shapes | args flat | args shaped | args auto | out flat | "
               "out shaped | out auto | temp flat | temp shaped | temp auto |\n";
  std::cout << "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Row& row : rows) {
    auto field = [&](int vi, int64_t pjrt::CompiledMemoryStats::*f) -> std::string {
      return row.r[vi].ok ? bytes(double(row.r[vi].mem.*f)) : "-";
    };
    std::cout << "| " << row.w.name << " | " << row.w.dtype << " | " << row.w.shapes;
    for (auto f : {&pjrt::CompiledMemoryStats::argument_size_in_bytes,
                   &pjrt::CompiledMemoryStats::output_size_in_bytes,
                   &pjrt::CompiledMemoryStats::temp_size_in_bytes}) {
      for (int vi = 0; vi < 3; ++vi) std::cout << " | " << field(vi, f);
    }
    std::cout << " |\n";
  }

  // Differences in flops between variants (the reshapes should not add any).
  for (const Row& row : rows) {
    if (!row.r[0].ok || !row.r[1].ok) continue;
    double a = row.r[0].cost.flops, b = row.r[1].cost.flops;
    if (a != b) {
      notes.push_back(row.w.name + " " + row.w.dtype + " " + row.w.shapes + ": flops flat " +
                      count(a) + " vs shaped " + count(b));
    }
  }
  if (!notes.empty()) {
    std::cout << "\nNotes:\n";
    for (const std::string& n : notes) std::cout << "- " << n << "\n";
  }

  // Does a CPU plugin accept mhlo.layout_mode = "auto" through PJRT_Client_Compile?
  for (const std::string& path : cpu_plugins) {
    std::cout << "\nCPU plugin " << path << ":\n";
    try {
      auto cpu = pjrt::Api::load(path);
      pjrt::Client client(cpu, {});
      std::cout << "  PJRT " << cpu->version_string() << ", platform " << client.platform_name()
                << " " << client.platform_version() << "\n";
      Workload w = matmul(DType::F32, {256, 256}, {256, 256}, "matmul");
      for (Variant v : variants) {
        std::unique_ptr<pjrt::Executable> exe;
        try {
          exe = client.compile(w.build(v), pjrt::CompileOptions{});
        } catch (const std::exception& e) {
          std::cout << "  " << variant_name(v) << ": refused: " << first_line(e.what(), 600) << "\n";
          continue;
        }
        std::cout << "  " << variant_name(v) << ": compiled";
        try {
          auto cost = pjrt::CostSummary::from(exe->cost_analysis());
          std::cout << "; flops " << count(cost.flops) << ", bytes accessed "
                    << bytes(cost.bytes_accessed) << "\n";
        } catch (const std::exception& e) {
          std::cout << "; no cost analysis: " << first_line(e.what(), 300) << "\n";
        }
      }
    } catch (const std::exception& e) {
      std::cout << "  could not load/create a client: " << first_line(e.what(), 600) << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "tpu_layout_study: " << e.what() << "\n";
    return 1;
  }
}
