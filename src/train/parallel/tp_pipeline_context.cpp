// TpPipelineContext: the trainer's hooks for a rank of a tensor-parallel pipeline stage.
#include "train/parallel/tp_pipeline_context.h"

#include <algorithm>
#include <string>
#include <vector>

#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/tp_stage_layout.h"

namespace gpulab::train::parallel {

std::vector<torch::Tensor> take_tied_copy(const TpCausalLm& lm, int stage,
                                          std::vector<TpCausalLm::NamedGrad>& grads) {
  std::vector<torch::Tensor> copy;
  for (const auto& g : grads)
    if (is_tied_copy(lm, stage, g.name)) copy.push_back(g.grad);
  std::erase_if(grads, [&](const auto& g) { return is_tied_copy(lm, stage, g.name); });
  return copy;
}

TpPipelineContext::TpPipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts,
                                     int tp, int pp)
    : PipelineContext(place, opts, tp, pp, std::make_unique<TpStageLayout>()) {
  group_ = std::make_unique<TpGroup>(pipeline_mesh()->tp());
}

TpPipelineContext::~TpPipelineContext() = default;

// The data-parallel mean (the pipeline's flat all-reduce of the stage's gradients), then the
// sums over the TP group of what each rank holds part of (sequence-parallel norms, shared kv
// heads). Both are linear, so their order does not matter.
void TpPipelineContext::after_backward(torch::nn::Module& model) {
  PipelineContext::after_backward(model);
  tp_model_of(model).finish_gradients();
}

// torch's clip_grad_norm_ over the whole model: the TP model's squared norms (split gradients
// summed over the TP group, replicated ones counted once) summed over the stages too, which hold
// disjoint parameters, but for the tied embedding: the last stage's copy (the first stage's
// gradient, summed between them) is scaled but not counted.
double TpPipelineContext::clip_grad_norm(torch::nn::Module& model, double max_norm) {
  auto& lm = tp_model_of(model);
  auto grads = lm.whole_gradients();
  const auto uncounted = take_tied_copy(lm, pipeline_mesh()->coord().pp, grads);
  const double norm = lm.clip_grad_norm(grads, max_norm, &pipeline_mesh()->pp());
  // The coefficient TpLlamaForCausalLM::clip_grad_norm applied (torch's, clamped at 1).
  const double coef = std::min(1.0, max_norm / (norm + 1e-6));
  torch::NoGradGuard no_grad;
  for (const auto& g : uncounted) g.mul_(coef);
  return norm;
}

}  // namespace gpulab::train::parallel
