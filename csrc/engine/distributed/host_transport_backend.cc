#include "engine/distributed/host_transport_backend.h"

#include <ATen/ATen.h>

#include "engine/distributed/call_agreement.h"
#include "engine/distributed/completed_work.h"

namespace tpu::engine::distributed {
namespace {

std::string describe(const at::Tensor& t) {
  return c10::str(t.device(), " ", t.scalar_type(), t.sizes());
}

// Runs a host collective to completion; gloo raises its own errors (timeouts, a peer that
// closed its connection) from wait().
void finish(const c10::intrusive_ptr<c10d::Work>& work) {
  if (work) work->wait();
}

// PREMUL_SUM (FSDP's gradient scaling) is a multiply before a SUM; the host backend gets SUM.
c10d::ReduceOp scale_for_premul(const c10d::ReduceOp& op, std::vector<at::Tensor>& host) {
  if (op.op_ != c10d::ReduceOp::PREMUL_SUM) return op;
  // NCCLPreMulSumSupplement: the name in torch 2.11; 2.13 keeps it as an alias of PreMulSumSupplement.
  auto* premul = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(premul != nullptr, "tpu backend: PREMUL_SUM without a factor");
  for (at::Tensor& t : host) {
    if (premul->tensor_factor.defined()) {
      t.mul_(premul->tensor_factor.to(at::kCPU));
    } else {
      t.mul_(premul->double_factor);
    }
  }
  return c10d::ReduceOp(c10d::ReduceOp::SUM);
}

// Elements an all_to_all_single moves to (or from) each rank: equal chunks of dim 0 when no
// split sizes are given.
std::vector<int64_t> split_numels(const at::Tensor& t, const std::vector<int64_t>& splits, int size) {
  int64_t rows = t.dim() > 0 ? t.size(0) : 1;
  int64_t per_row = rows > 0 ? t.numel() / rows : 0;
  std::vector<int64_t> out;
  for (int j = 0; j < size; ++j) {
    out.push_back(splits.empty() ? t.numel() / size : splits.at(j) * per_row);
  }
  return out;
}

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& l : lists) out.insert(out.end(), l.begin(), l.end());
  return out;
}

std::vector<std::vector<at::Tensor>> regroup(const std::vector<at::Tensor>& flat,
                                             const std::vector<std::vector<at::Tensor>>& shape_of) {
  std::vector<std::vector<at::Tensor>> out;
  size_t i = 0;
  for (const auto& l : shape_of) {
    out.emplace_back(flat.begin() + static_cast<long>(i), flat.begin() + static_cast<long>(i + l.size()));
    i += l.size();
  }
  return out;
}

}  // namespace

HostTransportBackend::HostTransportBackend(c10::intrusive_ptr<c10d::Backend> host, int rank, int size)
    : c10d::Backend(rank, size), host_(std::move(host)) {
  TORCH_CHECK(host_, "tpu backend: no host transport backend");
}

void HostTransportBackend::setTimeout(std::chrono::milliseconds timeout) { host_->setTimeout(timeout); }

c10::intrusive_ptr<c10d::Work> HostTransportBackend::endCoalescing() {
  // Every collective inside the coalescing block already ran when it was called.
  return done(c10d::OpType::COALESCED, {});
}

at::Tensor HostTransportBackend::to_host(const char* op, const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "torch.distributed ", op,
              " on the tpu backend: expected tpu tensors, got ", describe(t));
  TORCH_CHECK(t.layout() == at::kStrided, "torch.distributed ", op, " on the tpu backend: only dense tensors, got ",
              t.layout());
  at::Tensor host = t.to(at::kCPU).contiguous();
  bytes_to_host_ += host.nbytes();
  return host;
}

std::vector<at::Tensor> HostTransportBackend::to_host(const char* op, const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(to_host(op, t));
  return out;
}

std::vector<at::Tensor> HostTransportBackend::host_like(const char* op, const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "torch.distributed ", op,
                " on the tpu backend: expected tpu output tensors, got ", describe(t));
    out.push_back(at::empty(t.sizes(), t.options().device(at::kCPU)));
  }
  return out;
}

void HostTransportBackend::copy_back(std::vector<at::Tensor>& device, const std::vector<at::Tensor>& host) {
  for (size_t i = 0; i < device.size(); ++i) {
    device[i].copy_(host[i]);
    bytes_from_host_ += host[i].nbytes();
  }
}

void HostTransportBackend::agree(const CallSignature& mine) {
  if (call_checks_enabled()) check_ranks_agree(*host_, getRank(), getSize(), mine);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::done(c10d::OpType type, std::vector<at::Tensor> outputs,
                                                          int source_rank) {
  return c10::make_intrusive<CompletedWork>(getRank(), type, std::move(outputs), source_rank);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  agree(signature_of("broadcast", c10d::OpType::BROADCAST, tensors));
  std::vector<at::Tensor> host = to_host("broadcast", tensors);
  finish(host_->broadcast(host, opts));
  copy_back(tensors, host);
  return done(c10d::OpType::BROADCAST, tensors);
}

// all_reduce, its coalesced form and reduce: in-place reductions of `tensors` that differ only in
// their options type and which ranks get the result.
template <typename Opts, typename HostCall>
c10::intrusive_ptr<c10d::Work> HostTransportBackend::reduce_in_place(const char* op, c10d::OpType type,
                                                                     std::vector<at::Tensor>& tensors,
                                                                     const Opts& opts, bool result_here,
                                                                     HostCall host_call) {
  agree(signature_of(op, type, tensors));
  std::vector<at::Tensor> host = to_host(op, tensors);
  Opts o = opts;
  o.reduceOp = scale_for_premul(opts.reduceOp, host);
  finish(host_call(host, o));
  if (result_here) copy_back(tensors, host);
  return done(type, tensors);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  return reduce_in_place("all_reduce", c10d::OpType::ALLREDUCE, tensors, opts, true,
                         [&](std::vector<at::Tensor>& h, const c10d::AllreduceOptions& o) { return host_->allreduce(h, o); });
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return reduce_in_place("all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, opts, true,
                         [&](std::vector<at::Tensor>& h, const c10d::AllreduceCoalescedOptions& o) {
                           return host_->allreduce_coalesced(h, o);
                         });
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  // Only the root's tensor is defined afterwards.
  return reduce_in_place("reduce", c10d::OpType::REDUCE, tensors, opts, getRank() == opts.rootRank,
                         [&](std::vector<at::Tensor>& h, const c10d::ReduceOptions& o) { return host_->reduce(h, o); });
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  agree(signature_of("all_gather", c10d::OpType::ALLGATHER, inputs));
  std::vector<at::Tensor> host_in = to_host("all_gather", inputs);
  std::vector<at::Tensor> flat_out = flatten(outputs);
  std::vector<std::vector<at::Tensor>> host_out = regroup(host_like("all_gather", flat_out), outputs);
  finish(host_->allgather(host_out, host_in, opts));
  copy_back(flat_out, flatten(host_out));
  return done(c10d::OpType::ALLGATHER, flat_out);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::AllgatherOptions& opts) {
  agree(signature_of("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, {input}));
  at::Tensor host_in = to_host("all_gather_into_tensor", input);
  std::vector<at::Tensor> out{output};
  std::vector<at::Tensor> host_out = host_like("all_gather_into_tensor", out);
  finish(host_->_allgather_base(host_out[0], host_in, opts));
  copy_back(out, host_out);
  return done(c10d::OpType::_ALLGATHER_BASE, out);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  agree(signature_of("all_gather_coalesced", c10d::OpType::ALLGATHER_COALESCED, inputs));
  std::vector<at::Tensor> host_in = to_host("all_gather_coalesced", inputs);
  std::vector<at::Tensor> flat_out = flatten(outputs);
  std::vector<std::vector<at::Tensor>> host_out = regroup(host_like("all_gather_coalesced", flat_out), outputs);
  finish(host_->allgather_coalesced(host_out, host_in, opts));
  copy_back(flat_out, flatten(host_out));
  return done(c10d::OpType::ALLGATHER_COALESCED, flat_out);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  agree(signature_of("all_gather_into_tensor_coalesced", c10d::OpType::COALESCED, inputs));
  std::vector<at::Tensor> host_in = to_host("all_gather_into_tensor_coalesced", inputs);
  std::vector<at::Tensor> host_out = host_like("all_gather_into_tensor_coalesced", outputs);
  finish(host_->allgather_into_tensor_coalesced(host_out, host_in, opts));
  copy_back(outputs, host_out);
  return done(c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::GatherOptions& opts) {
  agree(signature_of("gather", c10d::OpType::GATHER, inputs));
  std::vector<at::Tensor> host_in = to_host("gather", inputs);
  std::vector<at::Tensor> flat_out = flatten(outputs);  // empty except on the root
  std::vector<std::vector<at::Tensor>> host_out = regroup(host_like("gather", flat_out), outputs);
  finish(host_->gather(host_out, host_in, opts));
  copy_back(flat_out, flatten(host_out));
  return done(c10d::OpType::GATHER, flat_out);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ScatterOptions& opts) {
  agree(signature_of("scatter", c10d::OpType::SCATTER, outputs));
  std::vector<std::vector<at::Tensor>> host_in;
  for (const auto& l : inputs) host_in.push_back(to_host("scatter", l));  // empty except on the root
  std::vector<at::Tensor> host_out = host_like("scatter", outputs);
  finish(host_->scatter(host_out, host_in, opts));
  copy_back(outputs, host_out);
  return done(c10d::OpType::SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                                    const c10d::ReduceScatterOptions& opts) {
  agree(signature_of("reduce_scatter", c10d::OpType::REDUCE_SCATTER, outputs));
  std::vector<at::Tensor> flat_in;
  for (const auto& l : inputs) {
    for (const at::Tensor& t : l) flat_in.push_back(to_host("reduce_scatter", t));
  }
  c10d::ReduceScatterOptions o = opts;
  o.reduceOp = scale_for_premul(opts.reduceOp, flat_in);
  std::vector<std::vector<at::Tensor>> host_in = regroup(flat_in, inputs);
  std::vector<at::Tensor> host_out = host_like("reduce_scatter", outputs);
  finish(host_->reduce_scatter(host_out, host_in, o));
  copy_back(outputs, host_out);
  return done(c10d::OpType::REDUCE_SCATTER, outputs);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                          const c10d::ReduceScatterOptions& opts) {
  agree(signature_of("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, {output}));
  std::vector<at::Tensor> host_in{to_host("reduce_scatter_tensor", input)};
  c10d::ReduceScatterOptions o = opts;
  o.reduceOp = scale_for_premul(opts.reduceOp, host_in);
  std::vector<at::Tensor> out{output};
  std::vector<at::Tensor> host_out = host_like("reduce_scatter_tensor", out);
  finish(host_->_reduce_scatter_base(host_out[0], host_in[0], o));
  copy_back(out, host_out);
  return done(c10d::OpType::_REDUCE_SCATTER_BASE, out);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  agree(signature_of("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, outputs));
  std::vector<at::Tensor> host_in = to_host("reduce_scatter_tensor_coalesced", inputs);
  c10d::ReduceScatterOptions o = opts;
  o.reduceOp = scale_for_premul(opts.reduceOp, host_in);
  std::vector<at::Tensor> host_out = host_like("reduce_scatter_tensor_coalesced", outputs);
  finish(host_->reduce_scatter_tensor_coalesced(host_out, host_in, o));
  copy_back(outputs, host_out);
  return done(c10d::OpType::COALESCED, outputs);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                   std::vector<int64_t>& output_split_sizes,
                                                                   std::vector<int64_t>& input_split_sizes,
                                                                   const c10d::AllToAllOptions& opts) {
  CallSignature sig = signature_of("all_to_all_single", c10d::OpType::ALLTOALL_BASE, {input});
  sig.send_numels = split_numels(input, input_split_sizes, getSize());
  sig.recv_numels = split_numels(output, output_split_sizes, getSize());
  agree(sig);
  at::Tensor host_in = to_host("all_to_all_single", input);
  std::vector<at::Tensor> out{output};
  std::vector<at::Tensor> host_out = host_like("all_to_all_single", out);
  finish(host_->alltoall_base(host_out[0], host_in, output_split_sizes, input_split_sizes, opts));
  copy_back(out, host_out);
  return done(c10d::OpType::ALLTOALL_BASE, out);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllToAllOptions& opts) {
  CallSignature sig = signature_of("all_to_all", c10d::OpType::ALLTOALL, inputs);
  for (const at::Tensor& t : inputs) sig.send_numels.push_back(t.numel());
  for (const at::Tensor& t : outputs) sig.recv_numels.push_back(t.numel());
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize() && static_cast<int>(outputs.size()) == getSize(),
              "torch.distributed all_to_all on the tpu backend: expected ", getSize(), " input and output tensors, got ",
              inputs.size(), " and ", outputs.size());
  agree(sig);
  std::vector<at::Tensor> host_in = to_host("all_to_all", inputs);
  std::vector<at::Tensor> host_out = host_like("all_to_all", outputs);
  finish(host_->alltoall(host_out, host_in, opts));
  copy_back(outputs, host_out);
  return done(c10d::OpType::ALLTOALL, outputs);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  std::vector<at::Tensor> host = to_host("send", tensors);
  finish(host_->send(host, dst_rank, tag));
  return done(c10d::OpType::SEND, tensors);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  std::vector<at::Tensor> host = host_like("recv", tensors);
  finish(host_->recv(host, src_rank, tag));
  copy_back(tensors, host);
  return done(c10d::OpType::RECV, tensors, src_rank);
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  std::vector<at::Tensor> host = host_like("recv", tensors);
  c10::intrusive_ptr<c10d::Work> work = host_->recvAnysource(host, tag);
  finish(work);
  copy_back(tensors, host);
  return done(c10d::OpType::RECVANYSOURCE, tensors, work->sourceRank());
}

c10::intrusive_ptr<c10d::Work> HostTransportBackend::barrier(const c10d::BarrierOptions& opts) {
  agree(CallSignature{"barrier", static_cast<int64_t>(c10d::OpType::BARRIER)});
  finish(host_->barrier(opts));
  return done(c10d::OpType::BARRIER, {});
}

}  // namespace tpu::engine::distributed
