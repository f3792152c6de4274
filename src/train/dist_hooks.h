// The distributed context the training loop talks to: rank and world size, the gradient
// all-reduce around backward and the optimizer step, metric all-reduce, barrier, broadcast.
// The default is one process (every hook a no-op); src/train/dist/ plugs in DDP (Gloo/NCCL).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "train/checkpoint.h"
#include "train/data/sampler.h"
#include "train/weights/safetensors.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train {

namespace parallel {
class TpGroup;
class DeviceMesh;
}  // namespace parallel
class RolloutSource;  // train/tasks/grpo_rollout_source.h

class DistContext {
 public:
  virtual ~DistContext() = default;

  int rank = 0;
  int world_size = 1;
  int local_rank = 0;        // index on this host: picks the GPU and the thread share
  int local_world_size = 1;  // ranks on this host
  // Among the ranks that read different data (the ranks of one tensor-parallel group read the
  // same batch): rank and world_size without --tp.
  int data_rank = 0;
  int data_world_size = 1;

  bool is_main() const { return rank == 0; }

  // GRPO with generation ranks of their own (--generation_gpus): where this training rank's
  // rollouts come from. Null: the task samples them itself (colocated).
  std::shared_ptr<RolloutSource> rollout_source;

  // Once, after the model is on its device and before the optimizer exists: make every rank
  // start from rank 0's parameters and buffers, and install gradient hooks if any.
  virtual void prepare_model(torch::nn::Module& model) {}

  // Before each backward pass. `sync` is false on gradient-accumulation micro-steps, where DDP
  // skips communication (PyTorch's no_sync()).
  virtual void before_backward(torch::nn::Module& model, bool sync) {}

  // After each backward pass whose `sync` was true: gradients must hold the mean over ranks when
  // this returns (DDP waits for its bucketed all-reduces here, or reduces them now).
  virtual void after_backward(torch::nn::Module& model) {}

  // Sums a tensor over ranks in place (metric sums: loss, correct, total). Tensor parallel:
  // over the data-parallel ranks, whose figures differ (the ranks of a TP group hold the same).
  virtual void all_reduce_sum(torch::Tensor& t) {}

  // Copies `t` from rank `root` to all ranks (used for RNG state, resume decisions).
  virtual void broadcast(torch::Tensor& t, int root) {}

  virtual void barrier() {}

  // Which samples this rank visits. Training: a shuffled order (seed + epoch); DDP gives each
  // rank its shard. Evaluation: every sample exactly once over all ranks, without padding, so
  // all-reduced sums give the single-process accuracy.
  virtual std::shared_ptr<Sampler> train_sampler(int64_t size, uint64_t seed) {
    return std::make_shared<RandomSampler>(size, seed);
  }
  virtual std::shared_ptr<Sampler> eval_sampler(int64_t size) {
    return std::make_shared<SequentialSampler>(size);
  }

  // Sharded data parallel (train/dist/shard_context.h). The tensors the optimizer steps instead
  // of the model's parameters: {decaying, not decaying} (this rank's shards); empty: the model's.
  virtual std::vector<std::vector<torch::Tensor>> optimizer_groups() { return {}; }
  // Clips the gradients the optimizer steps to a global 2-norm; returns that norm.
  virtual double clip_grad_norm(torch::nn::Module& model, double max_norm) {
    return torch::nn::utils::clip_grad_norm_(model.parameters(), max_norm);
  }
  // After every optimizer step (sharded: drop gradient shards, gather the updated parameters).
  virtual void after_step(torch::nn::Module& model, const torch::optim::Optimizer& opt) {}
  // Whether any rank found an inf or nan in its gradients (fp16's loss scaling; `mine`: this
  // rank's finding). Ranks that hold different gradients (ZeRO's shards) must skip a step
  // together, or their shards part and their loss scales with them. Collective where it is not
  // the identity.
  virtual bool overflow_anywhere(bool mine) { return mine; }
  // Before the model is read whole (the final weights): every parameter present, in the
  // master dtype (sharded mixed precision trains on bf16 copies of fp32 shards).
  virtual void gather_parameters(torch::nn::Module& model) {}

  // Sharded data parallel writes and reads its own checkpoints, on every rank (each its shard).
  // save: false when the trainer's (rank 0 writes the whole model) should be used instead.
  virtual bool save_checkpoint(const fs::path& dir, const TrainState& state,
                               torch::nn::Module& model, const torch::optim::Optimizer& opt,
                               int keep) {
    return false;
  }
  // nullopt when the trainer's load_checkpoint should be used instead.
  virtual std::optional<Result<TrainState>> load_checkpoint(const CheckpointInfo& ckpt,
                                                            torch::nn::Module& model,
                                                            torch::optim::Optimizer& opt) {
    return std::nullopt;
  }

  // This rank's tensor-parallel group (train/parallel/tp_group.h), or null without --tp: a task
  // builds its family's tensor-parallel model over it.
  virtual parallel::TpGroup* tp_group() { return nullptr; }
  // This rank's device mesh under --pp (train/parallel/device_mesh.h), or null: a task builds
  // its pipeline stage (the mesh's pp coordinate) and runs its schedule over the pp group.
  virtual parallel::DeviceMesh* pipeline_mesh() { return nullptr; }
  // The model's tensors under its ordinary (one-process) names and shapes, as the final weights
  // hold them, one at a time: model parallelism joins each from its ranks' pieces on rank 0
  // (parallel/mesh_export.h), so every rank creates and drains it together.
  virtual std::unique_ptr<TensorStream> model_stream(torch::nn::Module& model) {
    return std::make_unique<StateDictStream>(module_state_dict(model));
  }

  // A human-readable name for the header line ("gloo", "nccl"; "none" for one process).
  virtual std::string backend() const { return "none"; }
  // Whether the model is split over the ranks (ZeRO, TP, PP): a layout chosen for its memory.
  virtual bool splits_model() const { return false; }
};

using DistContextPtr = std::shared_ptr<DistContext>;

// The single-process context.
inline DistContextPtr single_process_context() {
  return std::make_shared<DistContext>();
}

}  // namespace gpulab::train
