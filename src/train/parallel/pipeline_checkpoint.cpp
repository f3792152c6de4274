// Gathering a pipeline stage's model and its ordinary-layout checkpoints (pipeline_checkpoint.h).
#include "train/parallel/pipeline_checkpoint.h"

#include "core/error.h"
#include "train/optim/optimizers.h"
#include "train/parallel/ordinary_checkpoint.h"

namespace gpulab::train::parallel {

namespace {

namespace o = torch::optim;

// Every stage's `held` tensors (names of `all`, whose other entries give shapes and dtypes) on
// every stage: each name's owner is the last stage holding it (a tied weight's copies are
// equal), and each stage's tensors cross in one broadcast. Names no stage holds are left out.
StateDict gather_stages(dist::Communicator& pp, const StateDict& all, const StateDict& held) {
  std::vector<std::string> names;
  for (const auto& [name, t] : all) names.push_back(name);
  auto owner = torch::full({static_cast<int64_t>(names.size())}, -1.0, torch::kDouble);
  for (size_t i = 0; i < names.size(); ++i)
    if (held.count(names[i])) owner[static_cast<int64_t>(i)] = pp.rank();
  owner = owner.to(pp.device());
  pp.allreduce_max(owner, "which pipeline stage holds each tensor");
  owner = owner.cpu();
  StateDict out;
  for (int s = 0; s < pp.size(); ++s) {
    std::vector<std::string> mine;
    std::vector<torch::Tensor> parts;
    int64_t numel = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      if (owner[static_cast<int64_t>(i)].item<double>() != s) continue;
      mine.push_back(names[i]);
      numel += all.at(names[i]).numel();
      if (s == pp.rank()) parts.push_back(held.at(names[i]).detach().reshape({-1}));
    }
    if (mine.empty()) continue;
    const auto dtype = all.at(mine.front()).scalar_type();
    auto flat =
        s == pp.rank()
            ? torch::cat(parts).to(pp.device())
            : torch::empty({numel}, torch::TensorOptions().dtype(dtype).device(pp.device()));
    pp.broadcast(flat, s, "pipeline stage " + std::to_string(s) + "'s tensors");
    flat = flat.cpu();
    int64_t at = 0;
    for (const auto& name : mine) {
      const auto& like = all.at(name);
      out[name] = flat.narrow(0, at, like.numel()).view(like.sizes()).clone();
      at += like.numel();
    }
  }
  return out;
}

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

StateDict gather_pipeline_model(dist::Communicator& pp, torch::nn::Module& model,
                                StageLayout& layout) {
  return gather_stages(pp, layout.ordinary_layout(model),
                       layout.to_ordinary(model, held_state(model)));
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
