// Program: assembles one StableHLO module from op applications over storages (torch-free).
//
// Eager opens a Program for one op; the compile driver and fused eager open one for many. It
// owns the builder, the de-duplicated storage slots (layout, sharding, donation), view reads
// and write-backs, runtime parameters (storage offsets, scalars, RNG key), rule application
// with result checks, device assertions, and finish(), which returns the module text with an
// explicit parameter list and result layout for whoever launches it.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "lowering/registry.h"
#include "program/layout.h"
#include "program/views.h"

namespace tpu::program {

using hlo::DType;
using hlo::Type;
using hlo::Value;

// A user-facing error found while assembling (a result of the wrong shape, an unsupported
// write). Drivers turn it into their framework's error.
class ProgramError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a parameter of @main is bound to at launch; `binding` is the driver's index.
struct Param {
  enum class Kind { Storage, Offset, Scalar, RngKey };
  Kind kind;
  int binding = 0;
  DType dtype = DType::F32;
};

// What a result of @main is; results come in this order: outputs, storages, assertions.
struct Result {
  enum class Kind { Output, Storage, Assertion };
  Kind kind;
  int binding = 0;  // Output: the driver's output index; Storage: the slot's binding
  DType dtype = DType::F32;
  Layout layout;         // shape of the result buffer
  std::string message;   // Assertion: raised when the flag is true
  hlo::CheckKind check_kind = hlo::CheckKind::IndexError;  // Assertion: the exception raised
  int owner = -1;        // Assertion: the driver's owner index (Program::set_owner), -1 if none
};

struct Module {
  std::string text;
  std::string tpu_text;  // the module lowered for libtpu where that differs (engine/call/target_modules.h)
  std::vector<Param> params;
  std::vector<Result> results;
};

struct StorageSlot {
  int binding = 0;          // the driver's storage index
  DType dtype = DType::F32;  // element type of the buffer
  Layout layout;
  bool unwritten = false;   // no buffer yet: reads see zeros, no parameter is passed
  std::string sharding;     // mhlo.sharding of the parameter (SPMD programs), or empty
};

// A view of a slot's storage.
struct View {
  std::vector<int64_t> sizes, strides;
  DType dtype = DType::F32;  // element type of the view (a bitcast of the storage's if needed)
  Access access = Access::Whole;
  int offset_binding = -1;   // >= 0: the storage offset is a runtime parameter with this binding
};

class Program {
 public:
  explicit Program(std::string label);

  hlo::Builder& builder() { return b_; }
  const std::string& label() const { return label_; }

  // Adds a storage (once per binding) and returns its slot.
  int storage(const StorageSlot& slot);
  Value read(int slot, const View& view);
  // Replaces the view's elements of the slot's current value; later reads see the update.
  void write(int slot, const View& view, Value value);

  // A runtime scalar of `dtype`, passed as `passed` (a 32-bit integer for an s64 value that fits:
  // a TPU emulates each 64-bit parameter with two calls, which libtpu's cost analysis counts as
  // -1 s each) and widened in the module.
  Value scalar(DType dtype, int binding, std::optional<DType> passed = std::nullopt);
  Value rng_key(int binding = 0);  // binding: which drawn key (OpCall::drawn_keys), if any

  // Calls `rule`; checks it returned one value per out type and converts each to its dtype.
  // A nullopt out type marks an output the caller does not want (e.g. a gradient masked off
  // by output_mask): whatever the rule returns there is passed through unchecked.
  std::vector<Value> apply(const lowering::Rule& rule, std::vector<lowering::Arg> args,
                           const std::vector<std::optional<Type>>& out_types, DType compute_dtype,
                           Value rng_key);

  // A new dense result: `value` permuted into memory order (order[0] outermost) and laid out
  // by the policy (shaped, or flat).
  void output(Value value, int binding, const std::vector<int64_t>& memory_order, LayoutPolicy policy);

  // Renames the program for what is applied next: fused eager applies many ops to one program,
  // and an error or a device assertion names the op that raised it.
  void set_label(std::string label) { label_ = std::move(label); }
  // Who the assertions made next belong to (Result::owner): fused eager raises a failed check in
  // the thread that recorded its op.
  void set_owner(int owner) { owner_ = owner; }
  // The slot's writes are not a result: nothing outside the program can read the storage (fused
  // eager's intermediates that died before the program ran).
  void discard(int binding);

  // The module: outputs, then every written storage (donating its parameter when the types
  // match), then device assertions.
  Module finish();

 private:
  struct SlotState {
    StorageSlot slot;
    Value initial, current;
    int arg_position = -1;  // parameter position, -1 when unwritten
    bool written = false;
    DType written_dtype = DType::F32;
  };
  Value offset(int binding, int64_t storage_elements);

  std::string label_;
  hlo::Builder b_;
  std::vector<SlotState> slots_;
  std::map<int, int> slot_of_binding_;
  std::map<int, Value> offsets_;
  std::vector<Param> params_;
  std::vector<std::pair<Value, Result>> outputs_;
  std::vector<std::string> check_labels_;  // the label when each device assertion was made
  std::vector<int> check_owners_;
  int owner_ = -1;
  int num_args_ = 0;
};

}  // namespace tpu::program
