// The DistContext of a rank under --tp with --pp: one device mesh of tensor-parallel groups
// inside pipeline stages, data parallel outermost. The model is the rank's pipeline stage with
// each of its pieces split over the TP group (the family's tensor-parallel model, other stages'
// pieces on the meta device); gradients are finished over the TP group and averaged over the
// data-parallel group, clipped by the norm over every stage and TP rank, metrics reported once;
// checkpoints and the final weights are gathered over the TP group, then over the stages, into
// the ordinary layout, so any --tp and --pp (one included) resume them.
#pragma once

#include <memory>

#include "train/parallel/pipeline_context.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

// On a stage after the first, the copy of a tied embedding (its gradient is the first stage's,
// summed between them): taken out of `grads` and returned, to be scaled with the rest but not
// counted in the norm. Empty elsewhere. Both TP x PP contexts' clipping.
std::vector<torch::Tensor> take_tied_copy(const TpCausalLm& lm, int stage,
                                          std::vector<TpCausalLm::NamedGrad>& grads);

class TpPipelineContext : public PipelineContext {
 public:
  // Every rank calls it together; throws what MeshLayout throws (tp x pp not dividing the world).
  TpPipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts, int tp, int pp);
  ~TpPipelineContext() override;

  void after_backward(torch::nn::Module& model) override;
  double clip_grad_norm(torch::nn::Module& model, double max_norm) override;
  TpGroup* tp_group() override { return group_.get(); }

 private:
  std::unique_ptr<TpGroup> group_;
};

}  // namespace gpulab::train::parallel
