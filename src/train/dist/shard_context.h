// ShardContext: the DistContext of sharded data parallel (--shard optimizer|gradients|full).
// Everything but the gradients is DDP's (broadcast of rank 0's model, buffers before each
// forward, samplers, metric sums); parameters, gradients and optimizer state are sharded by a
// ShardedModel, and the trainer's optimizer steps this rank's shards.
#pragma once

#include <memory>

#include "train/dist/ddp_context.h"
#include "train/dist/memory_plan.h"
#include "train/dist/sharded_model.h"

namespace gpulab::train::dist {

struct ShardContextOptions {
  DdpOptions ddp;
  ShardOptions shard;
};

class ShardContext : public DdpContext {
 public:
  ShardContext(const launch::RankPlace& place, const ShardContextOptions& opts);
  // Over a group of the world, as DdpContext's.
  ShardContext(std::shared_ptr<Communicator> group, const launch::RankPlace& place,
               const ShardContextOptions& opts);
  ~ShardContext() override;

  void prepare_model(torch::nn::Module& model) override;
  void before_backward(torch::nn::Module& model, bool sync) override;
  void after_backward(torch::nn::Module& model) override;
  std::vector<std::vector<torch::Tensor>> optimizer_groups() override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  void after_step(torch::nn::Module& model, const torch::optim::Optimizer& opt) override;
  // Over the sharding group: each rank's optimizer sees only its shard of the gradients.
  bool overflow_anywhere(bool mine) override;
  // After the first step: planned and measured bytes of this rank (tests read them); after the
  // second, the planner's step peak against the highest tensor accounting during step 2.
  struct MemoryCheck {
    int64_t planned[3] = {0, 0, 0};  // params, grads, optimizer
    int64_t measured[3] = {0, 0, 0};
    int64_t peak_planned[2] = {0, 0};  // params, grads
    int64_t peak_measured[2] = {0, 0};
  };
  const MemoryCheck& memory_check() const { return memory_check_; }
  void gather_parameters(torch::nn::Module& model) override;
  bool save_checkpoint(const fs::path& dir, const TrainState& state, torch::nn::Module& model,
                       const torch::optim::Optimizer& opt, int keep) override;
  std::optional<Result<TrainState>> load_checkpoint(const CheckpointInfo& ckpt,
                                                    torch::nn::Module& model,
                                                    torch::optim::Optimizer& opt) override;
  std::string backend() const override;
  bool splits_model() const override { return true; }

  ShardedModel* sharded() { return sharded_.get(); }

 private:
  void check_memory(const torch::optim::Optimizer& opt);
  void check_peak(const torch::optim::Optimizer& opt);
  PlanQuery plan_query(const torch::optim::Optimizer& opt) const;

  ShardOptions shard_opts_;
  std::shared_ptr<ShardedModel> sharded_;
  MemoryCheck memory_check_;
  int64_t steps_done_ = 0;  // optimizer steps this context has seen
};

}  // namespace gpulab::train::dist
