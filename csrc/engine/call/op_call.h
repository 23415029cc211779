// OpCall: one pass over a boxed call's IValues yields everything a driver needs:
// the cache key, the runtime bindings (storages, offsets, scalars, generator) and, per schema
// argument, where its values are (ArgRef) so a miss can hand the rule normalised arguments
// without walking the stack a second time.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/device/storage.h"
#include "hlo/types.h"
#include "program/layout.h"

namespace tpu::engine {

using hlo::DType;

struct TensorRef {
  int arg = 0, elem = -1;
  at::Tensor tensor;
  int storage = -1;  // index into OpCall::storages; -1 for a CPU scalar
  int scalar = -1;   // CPU scalars: index into OpCall::scalars
  bool has_offset = false;
  program::Access access = program::Access::Whole;
  // A runtime size (runtime_sizes.h): dim `runtime_dim` (and `runtime_dim2` of a square, when
  // not -1) holds scalars[runtime_length] rows.
  int runtime_dim = -1;
  int runtime_dim2 = -1;
  int runtime_length = -1;
};

struct StorageRef {
  c10::StorageImpl* impl = nullptr;
  StorageBuffer* buffer = nullptr;
  DType dtype = DType::F32;  // element type the module sees
  bool unwritten = false;
};

struct ScalarRef {
  int arg = 0;
  c10::Scalar value;
  bool from_cpu_tensor = false;  // a CPU 0-d tensor (takes part in promotion as a tensor)
  c10::ScalarType tensor_dtype = c10::kFloat;
  bool runtime_size = false;  // a tensor's runtime size (runtime_sizes.h): no part in promotion
};

// Where one schema argument's values are.
struct ArgRef {
  enum class Kind : uint8_t {
    None, Tensor, TensorList, Scalar, ScalarList, Int, ScalarType, Double, Bool, String, IntList,
    BoolList, Ignored
  };
  Kind kind = Kind::None;
  int first = 0;  // Tensor/TensorList: first TensorRef; Scalar/ScalarList: first ScalarRef
  int count = 0;  // TensorList: list length (undefined entries have no TensorRef); ScalarList
};

struct OpCall {
  std::vector<int64_t> key;
  std::vector<StorageRef> storages;
  std::vector<TensorRef> tensors;
  std::vector<ScalarRef> scalars;
  std::vector<ArgRef> args;
  std::optional<at::Generator> generator;
  bool wants_generator = false;
  int device = -1;
  // Fused eager: each random op's key, drawn from its generator when the op was recorded, by
  // RngKey binding. Empty: the key is drawn when the call is bound.
  std::vector<std::pair<uint64_t, uint64_t>> drawn_keys;
};

// A tensor argument has the lazy conjugate or negative bit set (math_bits.h): rules compute on
// values, so the caller resolves the bits and reads the call again.
struct MathBitsSet {};

// Reads the last `num_args` IValues; throws lowering::NotLowerable for argument kinds the
// engine does not lower (the caller then falls back to the CPU), MathBitsSet as above.
// `float` arguments are part of the key unless takes_runtime_floats(op) says the op takes them
// as runtime values (a fused optimizer's lr).
OpCall read_op_call(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args,
                    bool (*takes_runtime_floats)(const c10::OperatorHandle&));

// Adds tensor `t` (argument `arg`, list element `elem` or -1) to the call: its storage (once),
// its view and their key entries. `op` names the op in errors; null for a compiled graph's inputs.
void add_tensor(const c10::OperatorHandle* op, OpCall& call, const at::Tensor& t, int arg, int elem);

// `Scalar` operands are runtime values (a learning rate must not force a recompile).
bool is_scalar_arg(const c10::Argument& a);
// An int64 Scalar whose value fits 32 bits: its module parameter is s32 (key tag kScalar);
// any other integer Scalar keeps s64 (kWideScalar).
bool narrow_integer_scalar(const c10::Scalar& s);
// `Scalar[]` operands (per-tensor lrs / bias corrections of foreach optimizers) likewise.
bool is_scalar_list_arg(const c10::Argument& a);

struct VecHash {
  size_t operator()(const std::vector<int64_t>& v) const {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t x : v) {
      h ^= static_cast<uint64_t>(x);
      h *= 1099511628211ULL;
    }
    return h;
  }
};

}  // namespace tpu::engine
