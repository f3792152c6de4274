// A pipeline stage's tensors and its ordinary-layout checkpoints (pipeline_checkpoint.h).
#include "train/parallel/pipeline_checkpoint.h"

#include "core/error.h"
#include "train/optim/optimizers.h"
#include "train/parallel/ordinary_checkpoint.h"

namespace gpulab::train::parallel {

namespace {

namespace o = torch::optim;

}  // namespace

StateDict held_state(torch::nn::Module& model) {
  StateDict out;
  for (const auto& [name, t] : module_state_dict(model))
    if (!t.is_meta()) out[name] = t;
  return out;
}

bool is_tied_copy(const CausalLm& lm, int stage, const std::string& name) {
  return lm.config().tie_word_embeddings && stage > 0 &&
         name == lm.config().traits().token_embedding;
}

bool writes_pieces(const CausalLm& lm, int stage, const TpSlices& s, const std::string& name) {
  return s.first_copy && !is_tied_copy(lm, stage, name);  // the first stage's embedding is kept
}

std::vector<HeldPiece> first_copy_pieces(torch::nn::Module& model, int stage, StageLayout& layout,
                                         const StateDict& ordinary, const StateDict& dict) {
  const auto& lm = stage_model(model);
  std::vector<HeldPiece> out;
  for (const auto& [name, t] : dict) {
    const auto whole = ordinary.at(name).sizes();
    const auto s = layout.slices(model, name, whole);
    if (!writes_pieces(lm, stage, s, name)) continue;
    for (const auto& p : placements(s, whole))
      out.push_back({name, p.whole, in_box(t, p.local_at, p.whole.size)});
  }
  return out;
}

const CausalLm& stage_model(const torch::nn::Module& model) {
  const auto* lm = dynamic_cast<const CausalLm*>(&model);
  GPULAB_ASSERT(lm != nullptr,
                "--pp trains a language model's pipeline stage (the task builds it)");
  return *lm;
}

std::vector<std::pair<std::string, torch::Tensor>> held_parameters(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters())
    if (!p.value().is_meta()) out.emplace_back(p.key(), p.value());
  return out;
}

std::vector<std::vector<torch::Tensor>> decay_groups(torch::nn::Module& model) {
  std::vector<std::vector<torch::Tensor>> g(2);
  for (const auto& [name, p] : held_parameters(model))
    if (p.requires_grad()) g[takes_weight_decay(model, name, p) ? 0 : 1].push_back(p);
  return g;
}

Result<TrainState> load_pipeline_checkpoint(const CheckpointInfo& ckpt, torch::nn::Module& model,
                                            o::Optimizer& opt, StageLayout& layout) {
  const auto dtype = held_parameters(model).front().second.scalar_type();
  auto twin = ordinary_twin(stage_model(model).config(), dtype);
  auto twin_opt = same_kind_optimizer(opt, decay_groups(*twin));
  auto s = gpulab::train::load_checkpoint(ckpt, *twin, *twin_opt);
  if (!s) return s;
  const StateDict whole = layout.to_local(model, module_state_dict(*twin));
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : held_state(model)) t.copy_(whole.at(name));
  }
  Moments moments = state_moments(*twin, *twin_opt);
  for (auto& [field, tensors] : moments) tensors = layout.to_local(model, tensors);
  copy_state(*twin_opt, *twin, opt, model, moments);
  return s;
}

}  // namespace gpulab::train::parallel
