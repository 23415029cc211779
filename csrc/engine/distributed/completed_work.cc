#include "engine/distributed/completed_work.h"

#include <ATen/core/ivalue.h>

namespace tpu::engine::distributed {

CompletedWork::CompletedWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, int source_rank)
    : c10d::Work(rank, type), outputs_(std::move(outputs)), source_rank_(source_rank) {
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
  future_->markCompleted(c10::IValue(outputs_));
  completed_ = true;
}

int CompletedWork::sourceRank() const {
  TORCH_CHECK(source_rank_ >= 0, "sourceRank() is only known for recv from any source");
  return source_rank_;
}

}  // namespace tpu::engine::distributed
