// What fused eager records (fused_stream.h): the ops of one stream and the storages they touch,
// shared by the two ways a stream runs - as one fused program, or op by op (op_by_op.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <memory>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/call/op_call.h"
#include "engine/device/storage.h"
#include "engine/fused/fused_ops.h"
#include "pjrt/buffer.h"

namespace tpu::engine {

// A storage the stream touches, made by a recorded op or from outside. Storages are held weakly,
// so that freeing a tensor frees its storage (memory statistics, use counts) as in strict mode;
// an outside storage's buffer is held instead, for the ops that read it. A storage that died
// before the run is not written out.
struct StreamStorage {
  StorageRef ref;  // dtype and unwritten state when the stream first touched it; at the run, the
                   // buffer holder to bind (the live storage's, or a stand-in for a dead one)
  bool made_here = false;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> weak;
  std::shared_ptr<pjrt::Buffer> buffer;  // outside storages: their buffer (null if unwritten)
  std::vector<int64_t> dims;             // the buffer's layout
};

// A buffer holder for a storage that died before the run (engine/device/storage.h's StorageBuffer
// with the storage's dtype and layout): an outside one holds the buffer the stream kept; an
// intermediate's is empty until an op writes it.
std::unique_ptr<StorageBuffer> stand_in_for(const StreamStorage& s, int device);

struct RecordedOp {
  std::optional<c10::OperatorHandle> op;  // a copy: the caller's handle may be a temporary
  std::shared_ptr<const FusedOp> fused;
  std::vector<c10::IValue> args;  // the op's arguments with tensors dropped (the call has them)
  OpCall call;                    // tensors are metadata-only shells: no storage is kept alive
  std::vector<int> storage;       // the call's storage -> stream storage
  std::vector<int> made;          // per target: the stream storage a functional result makes, or -1
  int tensor_base = 0, scalar_base = 0;
  int owner = 0;  // index into Stream::threads: the thread that recorded it
  int rng_binding = -1;  // a random op: its key in Stream::keys
};

struct Stream {
  std::vector<std::thread::id> threads;  // the recording threads (device assertions go back to them)
  std::vector<RecordedOp> ops;
  std::vector<StreamStorage> storages;
  std::unordered_map<c10::StorageImpl*, int> index;
  std::vector<int64_t> key;  // every op's key and storage mapping
  size_t anchor_hash = 0;  // the signature whose recurrence marks a loop boundary
  size_t anchor_pos = 0;   // where the anchor was taken
  std::optional<size_t> pipeline_prefix;  // the signature of its first ops at the pipelining point
  size_t step_ops = 0;  // its ops' call signatures combined (a pipelined step: from the step's start)
  int device = -1;
  int num_tensors = 0, num_scalars = 0;
  std::vector<std::pair<uint64_t, uint64_t>> keys;  // random ops' keys, drawn when recorded
};

}  // namespace tpu::engine
