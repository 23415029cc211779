// The signature of one op call: a single pass over its IValue arguments yields the cache key
// (op, dtypes, sizes, strides, storage aliasing, non-tensor arguments) and the runtime bindings
// (storages, offsets, scalars, generator).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>
#include <vector>

#include "hlo/types.h"

namespace tpu::engine {

using hlo::DType;

struct TensorRef {
  int arg = 0, elem = -1;
  at::Tensor tensor;
  int storage = -1;        // index into Walk::storages, -1 for CPU scalars
  bool has_offset = false;
};

struct ScalarRef {
  int arg = 0;
  c10::Scalar value;
};

struct Walk {
  std::vector<int64_t> key;
  std::vector<c10::StorageImpl*> storages;
  std::vector<DType> storage_dtypes;
  std::vector<int64_t> storage_numels;
  std::vector<TensorRef> tensors;
  std::vector<ScalarRef> scalars;  // Scalar args and CPU 0-d tensors, in order
  std::optional<at::Generator> generator;
  bool wants_generator = false;
  int device = -1;
};

// Walks the last `num_args` IValues; throws lowering::NotLowerable for argument kinds the
// engine does not lower (the caller then falls back to the CPU).
Walk walk_arguments(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t num_args);

// `Scalar` operands are runtime values (a learning rate must not force a recompile).
bool is_scalar_arg(const c10::Argument& a);
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
