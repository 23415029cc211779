#include "engine/fused/background_compiler.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <pthread.h>
#include <thread>

#include "engine/compile/executable_cache.h"

namespace tpu::engine {
namespace {

struct Job {
  std::shared_ptr<BackgroundCompile> result;
  program::Module assembled;
  int device = 0;
};

// Never destroyed: the worker may outlive static destruction's start; the exit handler drains it
// first, so no compile runs while the plugin's runtime is torn down.
struct Worker {
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<Job> queue;
  bool busy = false;
  bool stopping = false;
};
Worker* g_worker = new Worker();
bool g_started = false;  // under g_start_mu
std::mutex g_start_mu;
Worker& worker() { return *g_worker; }

void run(Job& job) {
  try {
    job.result->cost = compile_measured(*job.result->module, std::move(job.assembled), job.device);
  } catch (const std::exception& e) {
    job.result->error = e.what();
    if (job.result->error.empty()) job.result->error = "compile failed";
  }
  job.result->done.store(true, std::memory_order_release);
}

void loop(Worker* worker) {
  Worker& w = *worker;
  std::unique_lock<std::mutex> lock(w.mu);
  while (true) {
    w.wake.wait(lock, [&] { return w.stopping || !w.queue.empty(); });
    if (w.stopping) break;
    Job job = std::move(w.queue.front());
    w.queue.pop_front();
    w.busy = true;
    lock.unlock();
    run(job);
    lock.lock();
    w.busy = false;
    if (w.queue.empty()) w.idle.notify_all();
  }
  w.busy = false;
  w.idle.notify_all();
}

// At exit: queued compiles are dropped (their streams keep running op by op, and nothing runs
// any more), the one in progress is waited for.
void stop_at_exit() {
  Worker& w = worker();
  std::unique_lock<std::mutex> lock(w.mu);
  w.stopping = true;
  w.queue.clear();
  w.wake.notify_all();
  w.idle.wait(lock, [&] { return !w.busy; });
}

// A forked child (a DataLoader worker, a spawned rank) has no worker thread and may have copied
// the queue's lock held: it starts afresh, with its own worker when it first needs one.
void reset_in_child() {
  g_worker = new Worker();  // the parent's copy is left alone: its lock may be held
  new (&g_start_mu) std::mutex();
  g_started = false;
}

void start_once() {
  std::lock_guard<std::mutex> lock(g_start_mu);
  if (g_started) return;
  static bool registered = [] {
    std::atexit(&stop_at_exit);  // registered after the runtime exists: runs before it is destroyed
    pthread_atfork(nullptr, nullptr, &reset_in_child);
    return true;
  }();
  (void)registered;
  std::thread(&loop, g_worker).detach();
  g_started = true;
}

}  // namespace

CompileCost compile_measured(CompiledModule& module, program::Module assembled, int device) {
  auto start = std::chrono::steady_clock::now();
  ThreadBuilds before = builds_on_this_thread();
  compile_module(module, std::move(assembled), device, /*keep_text=*/false);
  ThreadBuilds after = builds_on_this_thread();
  return CompileCost{after.compiled - before.compiled, after.loaded - before.loaded,
                     std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start)
                         .count()};
}

std::shared_ptr<BackgroundCompile> compile_in_background(std::shared_ptr<CompiledModule> module,
                                                         program::Module assembled, int device) {
  start_once();
  auto result = std::make_shared<BackgroundCompile>();
  result->module = std::move(module);
  Worker& w = worker();
  std::lock_guard<std::mutex> lock(w.mu);
  if (w.stopping) {
    result->error = "the process is exiting";
    result->done.store(true, std::memory_order_release);
    return result;
  }
  w.queue.push_back(Job{result, std::move(assembled), device});
  w.wake.notify_one();
  return result;
}

void wait_for_background_compiles() {
  Worker& w = worker();
  std::unique_lock<std::mutex> lock(w.mu);
  w.idle.wait(lock, [&] { return w.stopping || (w.queue.empty() && !w.busy); });
}

}  // namespace tpu::engine
