// Plans: what one compiled signature needs at run time (parameters to gather, where results
// go), and build_plan(), which lowers a call into a module and compiles it.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/aot_check.h"
#include "engine/signature.h"
#include "pjrt/executable.h"

namespace tpu::engine {

enum class ParamKind { Storage, Offset, Scalar, RngKey };
struct Param {
  ParamKind kind;
  int index = 0;  // storage index, tensor index or scalar index
  DType dtype = DType::F32;
};

struct Target {  // where a rule result goes
  bool functional = true;
  bool undefined = false;  // an optional output the op does not produce (e.g. output_mask)
  int tensor = -1;  // index into Walk::tensors for written arguments
  std::vector<int64_t> sizes, strides;
  c10::ScalarType dtype = c10::kFloat;
};

struct Plan {
  std::string op_name;
  std::shared_ptr<pjrt::Executable> exe;
  std::shared_ptr<const AotResult> aot;  // libtpu's verdict on the module (AOT check only)
  std::vector<Param> params;
  std::vector<Target> targets;           // one per flattened return (or written arg)
  std::vector<int> written_storages;     // module results after the functional ones
  std::vector<DType> written_dtypes;
  std::vector<std::string> check_messages;  // device assertions, the last module results
  std::vector<bool> return_is_list;      // per schema return
  std::vector<int> return_sizes;         // targets per schema return
  bool returns_written_args = false;     // schema returns nothing; results go to written args
  std::atomic<int64_t> runs{0};
};

struct OutputsNeedResize {
  std::vector<std::pair<int, std::vector<int64_t>>> resizes;  // (argument index, sizes)
};

// Runs the op's meta kernel for PyTorch's output metadata, builds one module (storage
// parameters, view reads, the rule, view write-back with donation, device assertions) and
// compiles it. Throws OutputsNeedResize, lowering::NotLowerable or a user error.
std::shared_ptr<Plan> build_plan(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                 size_t num_args, const Walk& w, const std::string& rule_name);

}  // namespace tpu::engine
