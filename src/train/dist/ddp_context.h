// DdpContext: the DistContext of a DDP rank. Broadcasts rank 0's parameters and buffers once,
// reduces gradients with the bucketed GradReducer, syncs BatchNorm statistics (--sync_bn) or
// rank 0's buffers (otherwise, as PyTorch DDP does before each forward), shards the data, and
// sums metrics.
#pragma once

#include <memory>

#include "launch/rank_env.h"
#include "train/dist/communicator.h"
#include "train/dist/grad_reducer.h"
#include "train/dist_hooks.h"

namespace gpulab::train::dist {

struct DdpOptions {
  CommOptions comm;
  ReducerOptions reducer;
  bool sync_bn = false;
};

class DdpContext : public DistContext {
 public:
  DdpContext(const launch::RankPlace& place, const DdpOptions& opts);
  // Over a group of the world (`group`: its ranks are this context's; `place` gives the local
  // rank and the local ranks' count, which pick the device and the thread share).
  DdpContext(std::shared_ptr<Communicator> group, const launch::RankPlace& place,
             const DdpOptions& opts);
  ~DdpContext() override;

  void prepare_model(torch::nn::Module& model) override;
  void before_backward(torch::nn::Module& model, bool sync) override;
  void after_backward(torch::nn::Module& model) override;
  void all_reduce_sum(torch::Tensor& t) override;
  void broadcast(torch::Tensor& t, int root) override;
  void barrier() override;
  std::shared_ptr<Sampler> train_sampler(int64_t size, uint64_t seed) override;
  std::shared_ptr<Sampler> eval_sampler(int64_t size) override;
  std::string backend() const override { return comm_->backend(); }

  Communicator& comm() { return *comm_; }
  GradReducer* reducer() { return reducer_.get(); }

 protected:
  // ShardContext (shard_context.h) reuses the broadcasts, samplers and metric reductions.
  void broadcast_tensors(std::vector<torch::Tensor> tensors, const std::string& what);
  // Every rank starts from rank 0's parameters and buffers; returns the parameters.
  std::vector<torch::Tensor> share_rank0_model(torch::nn::Module& model);
  // BatchNorm statistics stay alike: SyncBatchNorm, or rank 0's buffers before each forward.
  void keep_buffers_in_sync(torch::nn::Module& model);

  DdpOptions opts_;
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<GradReducer> reducer_;
  std::vector<torch::Tensor> buffers_;  // broadcast from rank 0 before each forward
  int64_t micro_steps_ = 0;
  int64_t stall_at_ = 0;  // test_hooks::stall_micro_step for this rank, 0: never
};

}  // namespace gpulab::train::dist
