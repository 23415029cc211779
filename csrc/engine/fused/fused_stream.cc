#include "engine/fused/fused_stream.h"

#include <ATen/ATen.h>
#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "engine/call/compiled_module.h"
#include "engine/call/program_binding.h"
#include "engine/call/target_modules.h"
#include "engine/compile/executable_cache.h"
#include "engine/compile/metrics.h"
#include "engine/device/dtypes.h"
#include "engine/device/generator.h"
#include "engine/device/pending_ops.h"
#include "engine/device/storage.h"
#include "engine/eager/eager_program.h"
#include "engine/eager/launch.h"
#include "engine/fused/background_compiler.h"
#include "engine/fused/eager_mode.h"
#include "engine/fused/op_by_op.h"
#include "engine/fused/pipelining.h"
#include "engine/fused/recorded_stream.h"

namespace tpu::engine {
namespace {

std::recursive_mutex g_mu;  // the stream and the program cache; a flush may re-enter (allocation)
Stream g_stream;

// A stream signature's program: compiled, or compiling in the background (then `pending`).
struct CachedProgram {
  std::shared_ptr<CompiledModule> module;
  std::shared_ptr<BackgroundCompile> pending;
  bool accounted = false;  // a background compile's cost is in the stats
  std::list<std::vector<int64_t>>::iterator lru;
};
std::unordered_map<std::vector<int64_t>, CachedProgram, VecHash> g_programs;
std::list<std::vector<int64_t>> g_lru;  // most recent first
// Background compiles: how often each new stream signature ran (by hash; a collision only moves
// when a compile starts). A stream is compiled when it runs the second time: one-off streams
// (a model's first call, a test) never pay a compile strict eager would not have made.
std::unordered_map<size_t, int> g_seen;
constexpr int kCompileAtRun = 2;

FusedStats g_stats;
std::map<std::string, int64_t> g_runs_by_op;  // never reset, like strict plans' run counts

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  long n = std::strtol(v, nullptr, 10);
  TORCH_CHECK_VALUE(n > 0, name, " must be a positive integer, got '", v, "'");
  return static_cast<size_t>(n);
}
// Ops per program: past it the stream runs anyway (a long loop body without host reads).
size_t max_ops() {
  static const size_t n = env_size("TORCH_TPU_FUSED_MAX_OPS", 2048);
  return n;
}
// Programs kept compiled (each holds an executable).
size_t max_programs() {
  static const size_t n = env_size("TORCH_TPU_FUSED_MAX_PROGRAMS", 256);
  return n;
}
// A stream shorter than this does not end at a loop boundary: its first op recurring so soon
// is an op repeated inside one iteration, not the next iteration.
constexpr size_t kMinLoopOps = 16;
// A stream whose anchor has not recurred within this many ops takes the op then recorded as its
// anchor: a loop's first iteration often starts with a signature that never comes back (an
// accumulator that was still unwritten), and the next iteration would not end the stream. Long
// enough that a decode step (which a host read ends every token) is not cut inside it: at 64, a
// padded-batch generate with a DynamicCache built new programs in later tokens.
constexpr size_t kReanchorOps = 256;

at::Tensor shell_of(const at::Tensor& t) {
  auto shell = at::detail::make_tensor<c10::TensorImpl>(c10::DispatchKeySet(c10::DispatchKey::Meta), t.dtype(),
                                                        t.device());
  shell.unsafeGetTensorImpl()->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return shell;
}

bool holds_tensors(const c10::IValue& v) {
  if (v.isTensor() || v.isTensorList()) return true;
  return v.isList() && !v.isIntList() && !v.isDoubleList() && !v.isBoolList();
}

int add_outside_storage(Stream& st, const StorageRef& ref, const at::Tensor& holder) {
  auto it = st.index.find(ref.impl);
  if (it != st.index.end()) return it->second;
  StreamStorage s;
  s.ref = ref;
  s.weak = holder.storage().getWeakStorageImpl();
  s.buffer = ref.buffer->buffer();
  s.dims = ref.buffer->dims;
  st.storages.push_back(std::move(s));
  int index = static_cast<int>(st.storages.size()) - 1;
  st.index[ref.impl] = index;
  return index;
}

std::vector<int64_t> buffer_dims_of(const Target& t) {
  std::vector<int64_t> dims;
  for (int64_t d : t.memory_order) dims.push_back(t.sizes[d]);
  if (layout_policy() == program::LayoutPolicy::Flat) return {program::Layout{dims}.numel()};
  return dims;
}

// Leaves no storage of the stream Pending: after a run every one it wrote holds its buffer; after a
// failed run the ones it had not written keep their old buffers.
void clear_pending(Stream& st) {
  for (StreamStorage& s : st.storages) {
    if (c10::intrusive_ptr<c10::StorageImpl> alive = s.weak->lock()) {
      storage_buffer(c10::Storage(std::move(alive))).pending = false;
    }
  }
}

program::Module assemble_stream(const Stream& st, const std::vector<bool>& dead) {
  program::Program p("fused program");
  std::vector<int> slot(st.storages.size(), -1);
  for (const RecordedOp& r : st.ops) {
    OpPlacement placement;
    placement.tensor_base = r.tensor_base;
    placement.scalar_base = r.scalar_base;
    placement.rng_binding = std::max(r.rng_binding, 0);
    for (int k : r.storage) {
      if (slot[k] < 0) slot[k] = p.storage(slot_of(st.storages[k].ref, k));  // from outside
      placement.slots.push_back(slot[k]);
    }
    p.set_label(r.fused->label);
    p.set_owner(r.owner);
    const OpOutputs& o = r.fused->outputs;
    std::vector<program::Value> results =
        apply_op(p, *r.op, r.args, r.args.size(), r.call, o, *r.fused->rule, placement);
    for (size_t t = 0; t < o.targets.size(); ++t) {
      int k = r.made[t];
      if (k < 0) continue;
      const Target& target = o.targets[t];
      const StreamStorage& s = st.storages[k];
      program::StorageSlot made;
      made.binding = k;
      made.dtype = to_hlo(target.dtype);
      made.layout = program::Layout{s.dims};
      made.unwritten = true;
      slot[k] = p.storage(made);
      program::View view;
      view.sizes = target.sizes;
      view.strides = target.strides;
      view.dtype = made.dtype;
      view.access = program::classify(program::Layout{s.dims}, target.sizes, target.strides, 0);
      p.write(slot[k], view, results[t]);
    }
  }
  for (size_t k = 0; k < dead.size(); ++k) {
    if (dead[k]) p.discard(static_cast<int>(k));
  }
  p.set_label("fused program");
  return p.finish();
}

void count_flush(const char* reason) { g_stats.flush_reasons[reason]++; }

// TORCH_TPU_FUSED_TRACE: 0 off, 1 a line per stream run, 2 (`ops`) also a line per op with its
// signature's hash, to diff two runs of a step whose call hashes differ.
int trace_level() {
  static const int level = [] {
    const char* v = std::getenv("TORCH_TPU_FUSED_TRACE");
    if (v == nullptr || *v == '\0' || std::string(v) == "0") return 0;
    return std::string(v) == "ops" ? 2 : 1;
  }();
  return level;
}

}  // namespace

bool fused_trace() { return trace_level() > 0; }

namespace {

void trace_flush(const Stream& st, const std::vector<int64_t>& key, const char* reason, const char* outcome) {
  std::vector<int64_t> live(key.begin() + static_cast<std::ptrdiff_t>(st.key.size()), key.end());
  std::fprintf(stderr, "torch-tpu fused: %zu ops (%s ... %s), calls %016zx, liveness %016zx, at %s: %s\n",
               st.ops.size(), st.ops.front().fused->label.c_str(), st.ops.back().fused->label.c_str(),
               VecHash()(st.key), VecHash()(live), reason, outcome);
  if (trace_level() < 2) return;
  for (size_t i = 0; i < st.ops.size(); ++i) {
    std::fprintf(stderr, "torch-tpu fused:   %4zu %s %016zx\n", i, st.ops[i].fused->label.c_str(), VecHash()(st.ops[i].call.key));
  }
}

// A background compile that finished: its cost joins the stats once.
void account(CachedProgram& c) {
  if (c.accounted || !c.pending || !c.pending->done.load(std::memory_order_acquire)) return;
  c.accounted = true;
  const CompileCost& cost = c.pending->cost;
  g_stats.compiles += cost.compiled + cost.loaded;
  g_stats.background_compiled += cost.compiled;
  g_stats.background_loaded += cost.loaded;
  g_stats.compile_time_us += cost.time_us;
  if (c.pending->failed()) {
    g_stats.background_failures++;
    TORCH_WARN("fused eager: the program of a ", c.module->label, " could not be compiled; the stream keeps ",
               "running op by op: ", c.pending->error.substr(0, c.pending->error.find('\n')));
  }
}

void remember(const std::vector<int64_t>& key, CachedProgram c) {
  if (g_programs.size() >= max_programs()) {
    g_programs.erase(g_lru.back());
    g_lru.pop_back();
  }
  g_lru.push_front(key);
  c.lru = g_lru.begin();
  g_programs[key] = std::move(c);
}

std::shared_ptr<CompiledModule> new_module(const Stream& st) {
  auto module = std::make_shared<CompiledModule>();
  module->label = "fused program (" + std::to_string(st.ops.size()) + " ops, " + st.ops.front().fused->label +
                  " ... " + st.ops.back().fused->label + ")";
  return module;
}

// The stream's compiled program, or null while it is not compiled (it then runs op by op). In the
// inline policy a new program is compiled here; in the background policy it is queued when the
// stream runs for the second time.
std::shared_ptr<CompiledModule> program_for(const Stream& st, const std::vector<int64_t>& key,
                                            const std::vector<bool>& dead, const char** outcome) {
  auto found = g_programs.find(key);
  if (found != g_programs.end()) {
    CachedProgram& c = found->second;
    g_lru.splice(g_lru.begin(), g_lru, c.lru);
    account(c);
    if (c.pending && !c.pending->ready()) {
      *outcome = "compiling: op by op";
      return nullptr;
    }
    g_stats.cache_hits++;
    *outcome = "cached program";
    return c.module;
  }
  auto assemble = [&] { return assemble_for_targets([&] { return assemble_stream(st, dead); }); };
  if (fused_compile() == FusedCompile::Inline) {
    std::shared_ptr<CompiledModule> module = new_module(st);
    CompileCost cost = compile_measured(*module, assemble(), st.device);
    g_stats.assembled++;
    g_stats.compiles += cost.compiled + cost.loaded;
    g_stats.compile_time_us += cost.time_us;
    remember(key, CachedProgram{module, nullptr, true, {}});
    *outcome = "compiled now";
    return module;
  }
  size_t hash = VecHash()(key);
  if (g_seen.size() > 16 * max_programs()) g_seen.clear();
  if (++g_seen[hash] < kCompileAtRun) {
    *outcome = "new: op by op";
    return nullptr;
  }
  g_seen.erase(hash);
  std::shared_ptr<CompiledModule> module = new_module(st);
  std::shared_ptr<BackgroundCompile> pending = compile_in_background(module, assemble(), st.device);
  g_stats.assembled++;
  g_stats.background_compiles++;
  remember(key, CachedProgram{module, pending, false, {}});
  *outcome = "seen again: queued, op by op";
  return nullptr;
}

// Launches the stream's program, its bindings as one call: the stream's storages, every op's
// tensors, scalars and drawn keys in order.
void run_program(const Stream& st, CompiledModule& module) {
  OpCall merged;
  merged.device = st.device;
  merged.drawn_keys = st.keys;
  for (const StreamStorage& s : st.storages) merged.storages.push_back(s.ref);
  for (const RecordedOp& r : st.ops) {
    for (TensorRef t : r.call.tensors) {
      if (t.storage >= 0) t.storage = r.storage[t.storage];
      if (t.scalar >= 0) t.scalar += r.scalar_base;
      merged.tensors.push_back(std::move(t));
    }
    merged.scalars.insert(merged.scalars.end(), r.call.scalars.begin(), r.call.scalars.end());
  }
  run_module(module, merged, /*random_draws=*/1, /*num_outputs=*/0, &st.threads);
  metrics().ops_run += static_cast<int64_t>(st.ops.size());
  g_stats.programs_run++;
  g_stats.ops_recorded += static_cast<int64_t>(st.ops.size());
  for (const RecordedOp& r : st.ops) g_runs_by_op[r.fused->label]++;
}

void flush_locked(const char* reason) {
  if (g_stream.ops.empty()) return;
  Stream st = std::move(g_stream);
  g_stream = Stream{};
  // The next stream is most likely the same step again: size it like this one so recording
  // does not regrow its vectors op by op (1.4% of the host thread in a decode loop, perf).
  g_stream.ops.reserve(st.ops.size());
  g_stream.storages.reserve(st.storages.size());
  g_stream.key.reserve(st.key.size());
  g_stream.index.reserve(st.index.size());
  set_ops_pending(false);
  count_flush(reason);
  note_pipelining(st, reason);

  // Which storages are still alive: the others are not written out. A dead outside storage is
  // still read, from the buffer the stream kept: a stand-in holds it for the binding.
  std::vector<c10::intrusive_ptr<c10::StorageImpl>> alive(st.storages.size());
  std::vector<bool> dead(st.storages.size(), false);
  std::vector<std::unique_ptr<StorageBuffer>> stand_ins;
  std::vector<int64_t> key = st.key;
  key.push_back(-7);  // separates the liveness bits
  for (size_t k = 0; k < st.storages.size(); ++k) {
    StreamStorage& s = st.storages[k];
    alive[k] = s.weak->lock();
    dead[k] = !alive[k];
    key.push_back(dead[k]);
    if (!dead[k]) {
      // The storage's buffer holder as it is now (an empty storage may have been resized since).
      s.ref.buffer = &storage_buffer(c10::Storage(alive[k]));
      continue;
    }
    if (s.made_here) {
      g_stats.dropped_results++;
      continue;
    }
    stand_ins.push_back(stand_in_for(s, st.device));
    s.ref.buffer = stand_ins.back().get();
  }

  try {
    const char* outcome = "";
    std::shared_ptr<CompiledModule> module = program_for(st, key, dead, &outcome);
    if (fused_trace()) trace_flush(st, key, reason, outcome);
    if (module) {
      run_program(st, *module);
    } else {
      // Its program is not compiled yet: the ops run through strict plans meanwhile.
      g_stats.op_by_op_compiles += run_op_by_op(st, dead, stand_ins);
      g_stats.op_by_op_runs++;
      g_stats.op_by_op_ops += static_cast<int64_t>(st.ops.size());
    }
  } catch (...) {
    clear_pending(st);
    throw;
  }
  clear_pending(st);
}

void flush_hook(const char* reason) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  flush_locked(reason);
}

const bool g_installed = (install_pending_flusher(&flush_hook), true);

}  // namespace

void record_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, size_t num_args, OpCall call,
               std::shared_ptr<const FusedOp> fused) {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  size_t op_hash = VecHash()(call.key);
  if (!g_stream.ops.empty()) {
    if (g_stream.device != call.device) flush_locked("device change");
    else if (g_stream.ops.size() >= max_ops()) flush_locked("op limit");
    else if (g_stream.ops.size() == pipeline_ops() && recurs_unchanged(g_stream)) flush_locked("pipelined");
    else if (g_stream.ops.size() >= kMinLoopOps && g_stream.ops.size() > g_stream.anchor_pos &&
             op_hash == g_stream.anchor_hash) flush_locked("loop boundary");
  }
  Stream& st = g_stream;
  if (st.ops.empty()) {
    st.device = call.device;
    st.anchor_hash = op_hash;
    st.anchor_pos = 0;
    st.step_ops = step_ops_at_stream_start();
  } else if (st.ops.size() - st.anchor_pos >= kReanchorOps) {
    st.anchor_hash = op_hash;
    st.anchor_pos = st.ops.size();
  }
  st.step_ops = with_op(st.step_ops, op_hash);
  RecordedOp r;
  for (auto it = stack->end() - static_cast<std::ptrdiff_t>(num_args); it != stack->end(); ++it) {
    r.args.push_back(holds_tensors(*it) ? c10::IValue() : *it);
  }
  r.op = op;
  r.fused = fused;
  auto me = std::find(st.threads.begin(), st.threads.end(), std::this_thread::get_id());
  r.owner = static_cast<int>(me - st.threads.begin());
  if (me == st.threads.end()) st.threads.push_back(std::this_thread::get_id());
  r.tensor_base = st.num_tensors;
  r.scalar_base = st.num_scalars;
  if (fused->draws_random) {
    // The key strict eager would take at this call, in program order.
    r.rng_binding = static_cast<int>(st.keys.size());
    st.keys.push_back(generator_of(call).get<TpuGenerator>()->next_key());
  }
  st.key.push_back(static_cast<int64_t>(call.key.size()));
  st.key.insert(st.key.end(), call.key.begin(), call.key.end());

  // Storages: the stream's index of each, and what the op writes becomes Pending.
  const OpOutputs& o = fused->outputs;
  r.storage.assign(call.storages.size(), -1);
  for (const TensorRef& t : call.tensors) {
    if (t.storage >= 0 && r.storage[t.storage] < 0) r.storage[t.storage] = add_outside_storage(st, call.storages[t.storage], t.tensor);
  }
  for (int k : r.storage) st.key.push_back(k);
  for (const Target& t : o.targets) {
    if (t.undefined || t.functional) continue;
    const TensorRef& written = call.tensors[t.tensor];
    StorageBuffer& s = *call.storages[written.storage].buffer;
    // An unwritten storage takes the element type its first write gives it (its layout is
    // already settled, call/op_call.cc), as the run will leave it.
    if (s.state() == StorageState::Unwritten) s.dtype = call.storages[written.storage].dtype;
    s.pending = true;
  }

  // New tensors: Pending storages the program will write.
  std::vector<at::Tensor> produced(o.targets.size());
  r.made.assign(o.targets.size(), -1);
  for (size_t i = 0; i < o.targets.size(); ++i) {
    const Target& t = o.targets[i];
    if (t.undefined || !t.functional) continue;
    if (c10::multiply_integers(t.sizes) == 0) {  // nothing to write: the program leaves it out
      produced[i] = at::empty_strided(t.sizes, t.strides,
                                      at::TensorOptions().dtype(t.dtype).device(c10::DeviceType::PrivateUse1, call.device));
      continue;
    }
    StreamStorage s;
    s.made_here = true;
    s.dims = buffer_dims_of(t);
    produced[i] = pending_tensor(to_hlo(t.dtype), s.dims, t.sizes, t.strides, t.dtype, call.device);
    c10::StorageImpl* impl = produced[i].storage().unsafeGetStorageImpl();
    s.ref = StorageRef{impl, &storage_buffer(produced[i]), to_hlo(t.dtype), /*unwritten=*/true};
    s.weak = produced[i].storage().getWeakStorageImpl();
    st.storages.push_back(std::move(s));
    r.made[i] = static_cast<int>(st.storages.size()) - 1;
    st.index[impl] = r.made[i];
  }

  push_returns(o, op, stack, num_args, call, produced);

  // What the program needs later, without keeping any storage alive.
  for (TensorRef& t : call.tensors) {
    if (t.storage >= 0) t.tensor = shell_of(t.tensor);
  }
  r.call = std::move(call);
  st.num_tensors += static_cast<int>(r.call.tensors.size());
  st.num_scalars += static_cast<int>(r.call.scalars.size());
  st.ops.push_back(std::move(r));
  set_ops_pending(true);
}

void flush_fused(const char* reason) { flush_hook(reason); }

size_t fused_pipeline_ops() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return pipeline_ops();
}

void set_fused_pipeline_ops(int64_t n) {
  TORCH_CHECK_VALUE(n >= 0, "the fused eager pipelining point must be a non-negative number of ops, got ", n);
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  flush_locked("pipelining changed");
  store_pipeline_ops(n);
}

FusedStats fused_stats() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  for (auto& [key, c] : g_programs) account(c);
  return g_stats;
}

void wait_for_fused_compiles() { wait_for_background_compiles(); }

std::map<std::string, int64_t> fused_runs_by_op() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  return g_runs_by_op;
}

void note_ran_strict(const std::string& label, const char* why) {
  if (fused_trace()) std::fprintf(stderr, "torch-tpu fused: %s runs strict: %s\n", label.c_str(), why);
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_stats.ran_strict[label + ": " + why]++;
}

void reset_fused_stats() {
  std::lock_guard<std::recursive_mutex> lock(g_mu);
  g_stats = FusedStats{};
}

}  // namespace tpu::engine
