// The DistContext of a rank under --tp with --shard optimizer|gradients|full: one device mesh
// (tensor parallel innermost, data parallel outermost) whose data-parallel group shards the
// rank's TP part as ZeRO-1/2/3 does a whole model (dist::ShardContext over that group). The TP
// model's own gradient sums and the global gradient norm run on the pieces of the gradient
// shards (the ranks of a TP group hold shards of one layout); checkpoints and the final weights
// are written in the ordinary layout, so any TP size and any --shard resumes them.
#pragma once

#include <memory>
#include <vector>

#include "train/parallel/mesh_shard_context.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

// The pieces of this rank's gradient shards, each under the name of the parameter it belongs to
// (a shard may hold the end of one parameter and the start of the next; padding is none): what
// the TP model's gradient sums and norm take under ZeRO (here and with --pp).
std::vector<TpCausalLm::NamedGrad> shard_gradients(TpCausalLm& lm, dist::ShardedModel& sharded);

class TpShardContext : public MeshShardContext {
 public:
  // Every rank calls it together; throws what MeshLayout throws (tp not dividing the world).
  TpShardContext(const launch::RankPlace& place, const dist::ShardContextOptions& opts, int tp);
  ~TpShardContext() override;

  void after_backward(torch::nn::Module& model) override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  TpGroup* tp_group() override { return group_.get(); }
  std::unique_ptr<TensorStream> model_stream(torch::nn::Module& model) override;
  bool save_checkpoint(const fs::path& dir, const TrainState& state, torch::nn::Module& model,
                       const torch::optim::Optimizer& opt, int keep) override;
  std::optional<Result<TrainState>> load_checkpoint(const CheckpointInfo& ckpt,
                                                    torch::nn::Module& model,
                                                    torch::optim::Optimizer& opt) override;

 private:
  std::unique_ptr<TpGroup> group_;
};

}  // namespace gpulab::train::parallel
