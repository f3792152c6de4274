// A language model split over a tensor-parallel group, as the trainer's hooks see it: a CausalLm
// (the loop, the optimizer's decay groups and the task take it like any other) plus what a
// split model needs besides: its vocabulary-parallel loss, the gradients to finish after the
// backward pass, the global gradient norm, and the conversions between a rank's shard and the
// ordinary (Hugging Face) state dict, in which every checkpoint and export is written. A family
// with a tensor-parallel model has one row in tp_families.h.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/models/causal_lm.h"
#include "train/parallel/tp_group.h"
#include "train/parallel/tp_slices.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

class TpCausalLm : public CausalLm {
 public:
  // (loss, correct): the mean cross-entropy of this rank's logits (its vocabulary columns)
  // against the targets, and how many positions the whole vocabulary's argmax gets right; both
  // the same on every rank, and the full logits are never gathered.
  virtual std::pair<torch::Tensor, torch::Tensor> loss_of(const torch::Tensor& logits,
                                                          const torch::Tensor& targets) = 0;
  // A gradient, or a piece of one, under its parameter's ordinary name: the whole .grad() of a
  // parameter, or (sharded data parallel over the data-parallel ranks) the part of it that lies
  // in this rank's shard of a flat buffer. The ranks of a TP group hold pieces of one size at
  // the same places (their shards have one shape), so pieces are summed over the group as whole
  // gradients are.
  struct NamedGrad {
    std::string name;
    torch::Tensor grad;
  };
  // Every parameter's whole gradient (those that have one).
  std::vector<NamedGrad> whole_gradients() {
    std::vector<NamedGrad> out;
    for (auto& p : named_parameters())
      if (p.value().grad().defined()) out.push_back({p.key(), p.value().grad()});
    return out;
  }
  // After the backward pass, before clipping and the optimizer: sums over the group what each
  // rank holds only part of (every rank calls it, with pieces of the same names and sizes).
  virtual void finish_gradients(const std::vector<NamedGrad>& grads) = 0;
  void finish_gradients() { finish_gradients(whole_gradients()); }
  // Scales the gradients to a global 2-norm of at most max_norm (torch's clip_grad_norm_ over
  // the whole model: split gradients summed over the group, replicated ones counted once);
  // returns the norm. Every rank calls it. `disjoint`: a data-parallel group whose ranks hold
  // disjoint pieces (sharded gradients), over which the squares are summed too; null when every
  // data-parallel rank holds whole (averaged) gradients.
  virtual double clip_grad_norm(const std::vector<NamedGrad>& grads, double max_norm,
                                dist::Communicator* disjoint) = 0;
  double clip_grad_norm(double max_norm) {
    return clip_grad_norm(whole_gradients(), max_norm, nullptr);
  }
  // This rank's shard of the ordinary state dict (or of a tensor of the same shape per name,
  // such as an optimizer moment), and back: `gather` is collective and gives every rank the
  // ordinary tensors.
  virtual StateDict shard(const StateDict& full) const = 0;
  virtual StateDict gather(const StateDict& mine) = 0;
  // Where this rank's tensor `name` lies in the ordinary one of shape `whole` (what shard cuts).
  virtual TpSlices slices_of(const std::string& name, c10::IntArrayRef whole) const = 0;

  TpGroup& group() { return *group_; }
  // Sequence parallelism (Korthikanti et al. 2022) for the norm and residual regions: the
  // sequence length must be a multiple of the TP size.
  bool sequence_parallel = false;
  // torch's label_smoothing of the training loss (loss_of), in the vocabulary-parallel loss.
  double label_smoothing = 0.0;

 protected:
  TpCausalLm(TpGroup& group, DecoderConfig c) : CausalLm(std::move(c)), group_(&group) {}
  // Loads this rank's shard of the ordinary state dict into the built model; the pieces another
  // pipeline stage holds stay shapes on the meta device and take no weights.
  void load_shard(const StateDict& shard) {
    StateDict weights = shard;
    for (const auto& p : named_parameters())
      if (p.value().is_meta()) weights.emplace(p.key(), p.value());
    if (auto st = load_state_dict(*this, weights, "the tensor-parallel shard"); !st)
      throw Exception(st.error());
  }
  // Refuses a sequence of t positions longer than the shape's, or one that sequence parallelism
  // cannot split evenly over the group.
  void check_sequence(int64_t t) const {
    if (t > config_.max_positions)
      throw Exception(Code::kInvalidArgument,
                      "a sequence of " + std::to_string(t) + " tokens is longer than the model's " +
                          std::to_string(config_.max_positions) + " positions",
                      "use a shorter --seq_len");
    if (sequence_parallel && t % group_->size() != 0)
      throw Exception(Code::kInvalidArgument,
                      "sequence parallelism splits a sequence over the " +
                          std::to_string(group_->size()) + " tensor-parallel ranks, and " +
                          std::to_string(t) + " positions do not split evenly",
                      "use a --seq_len that is a multiple of --tp");
  }
  TpGroup* group_;
};

// The model a tensor-parallel rank trains (the TP contexts' hooks receive it as a Module).
inline TpCausalLm& tp_model_of(torch::nn::Module& model) {
  auto* lm = dynamic_cast<TpCausalLm*>(&model);
  GPULAB_ASSERT(lm != nullptr, "--tp trains a tensor-parallel model (the task builds it)");
  return *lm;
}

}  // namespace gpulab::train::parallel
