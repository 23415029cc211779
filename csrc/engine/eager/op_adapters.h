// Per-op quirks, one table entry per op with named fields (argument preparation, random bits,
// runtime floats, unannotated writes, result dtypes, meta kernels, the growing-dim path, the
// CPU fallback's guard) instead of branches in the generic path. The table lives in the engine,
// not beside the rules, because lowering/ is torch-free and these are ATen-level facts.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <vector>

namespace tpu::engine {

using PrepareFn = void (*)(const c10::OperatorHandle&, torch::jit::Stack*, size_t num_args);
using OverCapacityFn = bool (*)(const c10::OperatorHandle&, torch::jit::Stack*);

struct OpAdapter {
  // Rewrites the arguments before the call is read (registered as a separate kernel, so ops
  // without one pay nothing).
  PrepareFn prepare = nullptr;
  // Draws random bits though its schema has no Generator argument (native_dropout).
  bool draws_random_bits = false;
  // Its `float` arguments are runtime values, not part of the executable's key: a fused
  // optimizer's lr follows a schedule, one executable serves every step.
  bool runtime_floats = false;
  // Arguments the op writes although its schema does not say so (native_batch_norm updates
  // running_mean/var in training): their indices for this call. They become written targets
  // after the returns (op_outputs), and the rule returns their new values last.
  std::vector<int> (*unannotated_writes)(const torch::jit::Stack&, size_t first) = nullptr;
  // The CPU kernel's dtype for the first result, where PyTorch's Python meta kernel (what the
  // outputs are allocated from) gives another one (threshold_backward of integer grads).
  c10::ScalarType (*result_dtype)(const torch::jit::Stack&, size_t first) = nullptr;
  // Replaces PyTorch's meta kernel where that one checks another device's rules: takes the op's
  // arguments as meta tensors from the stack and pushes its returns, raising the CPU's errors.
  void (*meta)(const c10::OperatorHandle&, torch::jit::Stack*) = nullptr;
  // Runs the call over the whole capacity of a growing argument (engine/growing), after
  // `prepare`; returns false to leave the call to the rule.
  OverCapacityFn over_capacity = nullptr;
  // Checks made before the op runs on the CPU fallback, whose kernel trusts its arguments and
  // would touch memory it does not own (fallback_guards.h); raises the user's error.
  void (*before_cpu_fallback)(const c10::OperatorHandle&, const torch::jit::Stack&) = nullptr;
};

// The adapter of an ATen op ("index_put_"), or nullptr.
const OpAdapter* find_adapter(const c10::OperatorName& name);
// Whether the op's adapter makes its `float` arguments runtime values (read_op_call).
bool takes_runtime_floats(const c10::OperatorHandle& op);
// Runs the op's before_cpu_fallback guard, if it has one.
void check_before_cpu_fallback(const c10::OperatorHandle& op, const torch::jit::Stack& stack);

// Index tensors (`Tensor?[] indices` of index/index_put) may live on the CPU, as PyTorch
// allows for CUDA: they are copied to the indexed tensor's device. A CPU boolean mask becomes
// its coordinates first, computed on the host where the mask already is; a tpu mask whose
// result size depends on it (x[mask], x[mask] = tensor) becomes its coordinates on the device.
void move_cpu_indices(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args);

// An out= overload whose out tensor must have self's dtype (_logcumsumexp.out): checked first, as
// the public op does. It has no meta kernel and runs on the CPU fallback, whose kernel writes
// self's dtype into out regardless (past its end when narrower).
void check_out_dtype_is_self_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args);

// fill_ (or constant_pad_nd) of a float8 tensor with a Python number: the CPU's conversion of
// the value is checked ("value cannot be converted to type c10::Float8_e4m3fn without overflow":
// past the largest finite value, and inf for e4m3fn), unlike that of tensor elements, which rounds.
void check_float8_fill_values(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args);

// arange.start_out's `out` resized to the result's length first (the length depends on scalars
// that are runtime values, so it must be in the call's shapes).
void resize_arange_out(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args);

// _scaled_mm's and _scaled_mm_v2's results with the CPU kernels' checks (scaled_mm_meta.cc).
// PyTorch's meta kernels take meta tensors for CUDA ones: they require row-/column-major
// operands and extents divisible by 16, and raise other exception types than the CPU.
void scaled_mm_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack);
void scaled_mm_v2_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace tpu::engine
