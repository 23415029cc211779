#include "engine/fused/pipelining.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>

namespace tpu::engine {
namespace {

constexpr int64_t kDefaultPipelineOps = 64;
int64_t g_pipeline_ops = -1;  // -1: not read from the environment yet

// Steps that reached the pipelining point, by the signature of their first ops: the signatures
// of all the ops the last one ran, and how many times in a row it ran the same.
struct PastStep {
  size_t step_ops = 0;
  int repeats = 0;
};
std::unordered_map<size_t, PastStep> g_past_steps;
constexpr size_t kMaxRemembered = 1 << 16;
// Identical loop steps in a row before a step is cut: two requests of one bucket can share a
// stretch by chance and a third differ, but a decode or training loop repeats for good.
constexpr int kRepeatsBeforeCut = 2;

std::optional<size_t> g_cut_prefix;  // a cut step that has not ended yet: its first ops
size_t g_cut_step_ops = 0;            // and its ops' signatures so far

}  // namespace

size_t pipeline_ops() {
  if (g_pipeline_ops < 0) {
    g_pipeline_ops = kDefaultPipelineOps;
    const char* v = std::getenv("TORCH_TPU_FUSED_PIPELINE_OPS");
    if (v != nullptr && *v != '\0') {
      char* end = nullptr;
      long n = std::strtol(v, &end, 10);
      TORCH_CHECK_VALUE(*end == '\0' && n >= 0, "TORCH_TPU_FUSED_PIPELINE_OPS must be a non-negative integer, got '",
                        v, "'");
      g_pipeline_ops = n;
    }
  }
  return static_cast<size_t>(g_pipeline_ops);
}

void store_pipeline_ops(int64_t n) { g_pipeline_ops = n; }

bool recurs_unchanged(Stream& st) {
  st.pipeline_prefix = VecHash()(st.key);
  auto it = g_past_steps.find(*st.pipeline_prefix);
  return it != g_past_steps.end() && it->second.repeats >= kRepeatsBeforeCut;
}

size_t step_ops_at_stream_start() { return g_cut_prefix ? g_cut_step_ops : 0; }

size_t with_op(size_t step_ops, size_t op_hash) {
  return step_ops ^ (op_hash + 0x9e3779b97f4a7c15ULL + (step_ops << 6) + (step_ops >> 2));
}

void note_pipelining(const Stream& st, const char* reason) {
  const bool pipelined = std::strcmp(reason, "pipelined") == 0;
  const bool goes_on = pipelined || (g_cut_prefix && (std::strcmp(reason, "loop boundary") == 0 ||
                                                      std::strcmp(reason, "op limit") == 0));
  std::optional<size_t> prefix = g_cut_prefix ? g_cut_prefix : st.pipeline_prefix;
  if (!prefix) return;
  if (goes_on) {
    g_cut_prefix = prefix;
    g_cut_step_ops = st.step_ops;
    return;
  }
  g_cut_prefix.reset();
  // A loop's step ends where the loop reads the host (a decode step's stopping check, a loss) or
  // at its boundary; a stream cut short by a buffer replaced or a strict launch (a prompt's
  // upload and reshapes) is not one.
  const bool loop_step = std::strcmp(reason, "host read") == 0 || std::strcmp(reason, "synchronize") == 0 ||
                         std::strcmp(reason, "loop boundary") == 0;
  if (g_past_steps.size() >= kMaxRemembered) g_past_steps.clear();
  PastStep& past = g_past_steps[*prefix];
  past.repeats = loop_step && past.step_ops == st.step_ops ? past.repeats + 1 : 0;
  past.step_ops = st.step_ops;
}

}  // namespace tpu::engine
