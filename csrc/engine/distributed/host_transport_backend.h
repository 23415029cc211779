// The c10d backend of the `tpu` device (`init_process_group("tpu")`, alias "tpu_dist") on
// plugins that cannot communicate across processes.
//
// On a TPU pod the collectives belong inside executables (StableHLO all_reduce & co over a PJRT
// client created with the process group's key-value store; docs/parallel.md). The XLA CPU plugin
// ignores the key-value callbacks, so its processes cannot reach each other through PJRT: this
// backend moves the bytes of `tpu` tensors through the host instead. Each collective copies its
// inputs to host memory, runs the same collective on a host backend (gloo) created over the same
// store, and copies the results back, before it returns.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <string>
#include <vector>

#include "engine/distributed/call_agreement.h"

namespace tpu::engine::distributed {

class HostTransportBackend final : public c10d::Backend {
 public:
  // `host`: a backend for CPU tensors over the same ranks (a ProcessGroupGloo).
  HostTransportBackend(c10::intrusive_ptr<c10d::Backend> host, int rank, int size);

  const std::string getBackendName() const override { return "tpu"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override {}
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Bytes copied device -> host and host -> device so far (benchmarks/parallel.py).
  int64_t bytes_to_host() const { return bytes_to_host_; }
  int64_t bytes_from_host() const { return bytes_from_host_; }

 private:
  std::vector<at::Tensor> to_host(const char* op, const std::vector<at::Tensor>& tensors);
  at::Tensor to_host(const char* op, const at::Tensor& tensor);
  std::vector<at::Tensor> host_like(const char* op, const std::vector<at::Tensor>& tensors);
  void copy_back(std::vector<at::Tensor>& device, const std::vector<at::Tensor>& host);
  template <typename Opts, typename HostCall>
  c10::intrusive_ptr<c10d::Work> reduce_in_place(const char* op, c10d::OpType type, std::vector<at::Tensor>& tensors,
                                                 const Opts& opts, bool result_here, HostCall host_call);
  void agree(const CallSignature& mine);  // raises on every rank when the ranks' calls differ
  c10::intrusive_ptr<c10d::Work> done(c10d::OpType type, std::vector<at::Tensor> outputs, int source_rank = -1);

  c10::intrusive_ptr<c10d::Backend> host_;
  int64_t bytes_to_host_ = 0;
  int64_t bytes_from_host_ = 0;
};

}  // namespace tpu::engine::distributed
