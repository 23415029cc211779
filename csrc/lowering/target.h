// Which compiler a module is lowered for. Almost every rule emits one form that every PJRT plugin
// runs exactly. A few have a second form that only libtpu's passes reward: attention with a mask,
// written the way libtpu's flash-attention rewrite matches it (lowering/attention.cc), whose
// numerics differ from PyTorch's at infinities. Such a rule asks `lowering_target()`, which also
// marks the module as target-dependent, so a driver on another plugin can lower it once more for
// the AOT check (engine/call/target_modules.h).
#pragma once

namespace tpu::lowering {

enum class Target {
  Exact,  // PyTorch's results on every plugin (the CPU plugin, a GPU plugin)
  Tpu,    // the forms libtpu's passes rewrite into its own kernels
};

// The calling thread's target (Exact unless a TargetScope says otherwise). Read by a rule.
Target lowering_target();

// Sets the thread's target while a module is assembled, and tracks whether a rule read it.
class TargetScope {
 public:
  explicit TargetScope(Target target);
  ~TargetScope();
  TargetScope(const TargetScope&) = delete;
  TargetScope& operator=(const TargetScope&) = delete;
  // Whether a rule asked for the target since this scope opened.
  bool consulted() const;

 private:
  Target previous_;
  bool previous_consulted_;
};

}  // namespace tpu::lowering
