// A c10d Work that is already done: the host transport finishes each collective before it
// returns, so `wait()` has nothing to wait for and the future holds the output tensors.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <vector>

namespace tpu::engine::distributed {

class CompletedWork final : public c10d::Work {
 public:
  CompletedWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, int source_rank = -1);

  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds /*timeout*/) override { return true; }
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  int source_rank_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace tpu::engine::distributed
