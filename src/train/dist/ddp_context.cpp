// DdpContext: the DDP side of the trainer's hooks.
#include "train/dist/ddp_context.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "train/dist/distributed_sampler.h"
#include "train/dist/sync_batch_norm.h"
#include "train/test_hooks.h"

namespace gpulab::train::dist {

DdpContext::DdpContext(const launch::RankPlace& place, const DdpOptions& opts)
    : DdpContext(std::make_shared<Communicator>(place, opts.comm), place, opts) {}

DdpContext::DdpContext(std::shared_ptr<Communicator> group, const launch::RankPlace& place,
                       const DdpOptions& opts)
    : opts_(opts), comm_(std::move(group)) {
  rank = comm_->rank();
  world_size = comm_->size();
  local_rank = place.local_rank;
  local_world_size = place.local_world_size;
  data_rank = rank;
  data_world_size = world_size;
  stall_at_ = test_hooks::stall_micro_step(rank);
}

DdpContext::~DdpContext() = default;

// One broadcast per dtype: tensors are flattened into one buffer, sent, and copied back.
void DdpContext::broadcast_tensors(std::vector<torch::Tensor> tensors, const std::string& what) {
  std::map<std::pair<int, int>, std::vector<torch::Tensor>> groups;
  for (auto& t : tensors) {
    // A pipeline stage's other pieces are shapes on the meta device: nothing to send.
    if (!t.defined() || t.numel() == 0 || t.is_meta()) continue;
    groups[{static_cast<int>(t.scalar_type()), static_cast<int>(t.device().type())}].push_back(t);
  }
  torch::NoGradGuard no_grad;
  for (auto& [key, group] : groups) {
    std::vector<torch::Tensor> flat;
    for (auto& t : group) flat.push_back(t.detach().reshape({-1}));
    auto buffer = torch::cat(flat);
    comm_->broadcast(buffer, 0, what);
    int64_t off = 0;
    for (auto& t : group) {
      t.detach().copy_(buffer.narrow(0, off, t.numel()).view(t.sizes()));
      off += t.numel();
    }
  }
}

std::vector<torch::Tensor> DdpContext::share_rank0_model(torch::nn::Module& model) {
  auto params = model.parameters();
  auto buffers = model.buffers();
  std::vector<torch::Tensor> all(params.begin(), params.end());
  all.insert(all.end(), buffers.begin(), buffers.end());
  broadcast_tensors(all, "broadcast of rank 0's parameters");
  return params;
}

void DdpContext::keep_buffers_in_sync(torch::nn::Module& model) {
  if (opts_.sync_bn)
    convert_sync_batch_norm(model, comm_);
  else
    buffers_ = model.buffers();
}

void DdpContext::prepare_model(torch::nn::Module& model) {
  reducer_ = GradReducer::create(comm_, share_rank0_model(model), opts_.reducer);
  keep_buffers_in_sync(model);
}

void DdpContext::before_backward(torch::nn::Module& /*model*/, bool sync) {
  if (++micro_steps_ == stall_at_) test_hooks::stall(rank, stall_at_);
  // Without SyncBatchNorm each rank's running statistics drift apart; like PyTorch DDP
  // (broadcast_buffers=True) every forward starts from rank 0's.
  if (!buffers_.empty()) broadcast_tensors(buffers_, "broadcast of rank 0's buffers");
  if (reducer_) reducer_->prepare(sync);
}

void DdpContext::after_backward(torch::nn::Module& /*model*/) {
  if (reducer_) reducer_->finish();
}

void DdpContext::all_reduce_sum(torch::Tensor& t) {
  comm_->allreduce_sum(t, "metric all-reduce");
}

void DdpContext::broadcast(torch::Tensor& t, int root) {
  comm_->broadcast(t, root);
}

void DdpContext::barrier() {
  comm_->barrier();
}

std::shared_ptr<Sampler> DdpContext::train_sampler(int64_t size, uint64_t seed) {
  return std::make_shared<DistributedSampler>(size, seed, data_rank, data_world_size, true, true);
}

std::shared_ptr<Sampler> DdpContext::eval_sampler(int64_t size) {
  return std::make_shared<ShardSampler>(size, data_rank, data_world_size);
}

}  // namespace gpulab::train::dist
