#include "lowering/target.h"

namespace tpu::lowering {
namespace {
thread_local Target g_target = Target::Exact;
thread_local bool g_consulted = false;
}  // namespace

Target lowering_target() {
  g_consulted = true;
  return g_target;
}

TargetScope::TargetScope(Target target) : previous_(g_target), previous_consulted_(g_consulted) {
  g_target = target;
  g_consulted = false;
}

TargetScope::~TargetScope() {
  g_target = previous_;
  g_consulted = previous_consulted_ || g_consulted;
}

bool TargetScope::consulted() const { return g_consulted; }

}  // namespace tpu::lowering
