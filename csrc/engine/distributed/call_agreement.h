// Before a collective runs, every rank checks that all ranks are making the same call (same
// collective, dtype and element counts; matching all_to_all splits). Gloo aborts the whole
// process on a size mismatch (an enforce in its transport thread) instead of raising; this
// turns that into a RuntimeError on every rank, naming what each rank passed. One small
// all-gather per collective; TORCH_TPU_DIST_CHECK_CALLS=0 turns it off.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>
#include <vector>

namespace tpu::engine::distributed {

struct CallSignature {
  const char* op = "";                // the torch.distributed name, for messages
  int64_t op_code = 0;                // c10d::OpType
  int64_t dtype = -1;                 // at::ScalarType of the checked tensors, -1 when none
  std::vector<int64_t> numels;        // element count of each checked tensor
  std::vector<int64_t> send_numels;   // all_to_all: elements sent to each rank (else empty)
  std::vector<int64_t> recv_numels;   // all_to_all: elements expected from each rank
};

CallSignature signature_of(const char* op, c10d::OpType type, const std::vector<at::Tensor>& tensors);

bool call_checks_enabled();

// Raises (on every rank alike) when the ranks' signatures disagree.
void check_ranks_agree(c10d::Backend& host, int rank, int size, const CallSignature& mine);

}  // namespace tpu::engine::distributed
