#include "engine/fused/fused_ops.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>

#include "engine/eager/eager_program.h"
#include "engine/eager/op_adapters.h"
#include "engine/eager/plan.h"

namespace tpu::engine {
namespace {

std::mutex g_ops_mu;
std::unordered_map<std::vector<int64_t>, std::shared_ptr<const FusedOp>, VecHash> g_ops;
constexpr size_t kMaxFusedOps = 8192;  // signatures; past it the table starts again

}  // namespace

std::shared_ptr<const FusedOp> find_fused_op(const std::vector<int64_t>& key) {
  std::lock_guard<std::mutex> lock(g_ops_mu);
  auto it = g_ops.find(key);
  return it == g_ops.end() ? nullptr : it->second;
}

void insert_fused_op(const std::vector<int64_t>& key, std::shared_ptr<const FusedOp> op) {
  std::lock_guard<std::mutex> lock(g_ops_mu);
  if (g_ops.size() >= kMaxFusedOps) g_ops.clear();
  g_ops[key] = std::move(op);
}

std::shared_ptr<const FusedOp> build_fused_op(const c10::OperatorHandle& op, const torch::jit::Stack& stack,
                                              size_t num_args, const OpCall& call, const std::string& rule_name) {
  auto fused = std::make_shared<FusedOp>();
  fused->label = op_label(op);
  fused->outputs = plan_outputs(op, stack, num_args, call, rule_name);
  fused->rule = lowering::find_rule(rule_name);
  TORCH_INTERNAL_ASSERT(fused->rule != nullptr, "no lowering rule ", rule_name);
  const OpAdapter* adapter = find_adapter(op.operator_name());
  bool random = call.wants_generator || (adapter != nullptr && adapter->draws_random_bits);
  bool writes_empty = false;
  for (const Target& t : fused->outputs.targets) {
    if (!t.undefined && !t.functional && c10::multiply_integers(t.sizes) == 0) writes_empty = true;
  }
  // An empty argument written in place has no buffer to write (empty new results are made empty
  // when recorded: attention's unused logsumexp and RNG state). A random op takes its key when it
  // is recorded, so every draw takes its generator's keys in program order, as in strict eager.
  fused->not_recordable_because = writes_empty ? "an empty argument written in place" : nullptr;
  fused->draws_random = random;
  // The op alone, assembled once: a rule's error is raised here, at the op, not at the flush.
  if (fused->not_recordable_because == nullptr) (void)assemble_op_program(op, stack, num_args, call, fused->outputs, *fused->rule, fused->label);
  return fused;
}

const char* why_not_recorded(const OpCall& call, const FusedOp& op) {
  if (op.not_recordable_because != nullptr) return op.not_recordable_because;
  if (call.device < 0) return "no device operand";
  for (const StorageRef& s : call.storages) {
    if (!s.buffer->sharding.empty()) return "a sharded operand";
  }
  return nullptr;
}

}  // namespace tpu::engine
