// PipelineContext: the trainer's hooks for a pipeline-parallel rank.
#include "train/parallel/pipeline_context.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/models/causal_lm.h"
#include "train/optim/optimizers.h"
#include "train/parallel/ordinary_checkpoint.h"

namespace gpulab::train::parallel {

namespace {

namespace o = torch::optim;

const CausalLm& stage_model(const torch::nn::Module& model) {
  const auto* lm = dynamic_cast<const CausalLm*>(&model);
  GPULAB_ASSERT(lm != nullptr,
                "--pp trains a language model's pipeline stage (the task builds it)");
  return *lm;
}

// The parameters this stage holds (the rest are on the meta device), by name.
std::vector<std::pair<std::string, torch::Tensor>> held_parameters(torch::nn::Module& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : model.named_parameters())
    if (!p.value().is_meta()) out.emplace_back(p.key(), p.value());
  return out;
}

// make_optimizer's decay and no-decay groups over the parameters `model` holds, in its order:
// the stage's optimizer, and the ordinary twin's for checkpoints (as one process groups them).
std::vector<std::vector<torch::Tensor>> decay_groups(torch::nn::Module& model) {
  std::vector<std::vector<torch::Tensor>> g(2);
  for (const auto& [name, p] : held_parameters(model))
    if (p.requires_grad()) g[takes_weight_decay(model, name, p) ? 0 : 1].push_back(p);
  return g;
}

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

StateDict held_state(torch::nn::Module& model) {
  StateDict out;
  for (const auto& [name, t] : module_state_dict(model))
    if (!t.is_meta()) out[name] = t;
  return out;
}

}  // namespace

PipelineContext::PipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts,
                                 int pp)
    : PipelineContext(place, opts, 1, pp) {}

PipelineContext::PipelineContext(const launch::RankPlace& place, const dist::DdpOptions& opts,
                                 int tp, int pp)
    : DdpContext(place, opts) {
  mesh_ = std::make_shared<DeviceMesh>(*comm_, tp, pp);
  data_rank = mesh_->coord().dp;
  data_world_size = mesh_->layout().dp();
}

PipelineContext::~PipelineContext() = default;

// Every rank built its stage from the same seed's whole model (CausalLm::init_normal), so the
// replicas of a stage start equal without a broadcast.
void PipelineContext::prepare_model(torch::nn::Module& model) {
  (void)stage_model(model);
  model_ = &model;
}

// The data-parallel mean of the stage's gradients, in one flat all-reduce after the schedule's
// backward passes (the executor runs several per step, so no per-bucket hooks).
void PipelineContext::after_backward(torch::nn::Module& model) {
  if (data_world_size == 1) return;
  std::vector<torch::Tensor> grads;
  for (const auto& [name, p] : held_parameters(model))
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& g : grads) flat_parts.push_back(g.reshape({-1}));
  auto flat = torch::cat(flat_parts).to(mesh_->dp().device());
  mesh_->dp().allreduce_sum(flat, "gradient all-reduce (data parallel)");
  flat = flat.to(grads.front().device()).div_(static_cast<double>(data_world_size));
  torch::NoGradGuard no_grad;
  int64_t at = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, at, g.numel()).view(g.sizes()));
    at += g.numel();
  }
}

void PipelineContext::all_reduce_sum(torch::Tensor& t) {
  mesh_->metric_sum(t);
}

std::vector<std::vector<torch::Tensor>> PipelineContext::optimizer_groups() {
  GPULAB_ASSERT(model_ != nullptr, "the optimizer is made after prepare_model");
  return decay_groups(*model_);
}

// torch's clip_grad_norm_ over the whole model: the stages' squared norms summed over the
// pipeline group, a tied weight (held by the first and the last stage) counted once.
double PipelineContext::clip_grad_norm(torch::nn::Module& model, double max_norm) {
  const auto& lm = stage_model(model);
  const bool tied = lm.config().tie_word_embeddings && mesh_->coord().pp > 0;
  const std::string tied_name(lm.config().traits().token_embedding);
  std::vector<torch::Tensor> grads;
  auto sum_sq = torch::zeros({1}, torch::kDouble);
  for (const auto& [name, p] : held_parameters(model)) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    if (!(tied && name == tied_name)) sum_sq += p.grad().norm(2).to(torch::kDouble).pow(2).cpu();
  }
  sum_sq = sum_sq.to(mesh_->pp().device());
  mesh_->pp().allreduce_sum(sum_sq, "gradient norm (pipeline)");
  const double total = std::sqrt(sum_sq.cpu().item<double>());
  const double coef = std::min(1.0, max_norm / (total + 1e-6));
  torch::NoGradGuard no_grad;
  for (auto& g : grads) g.mul_(coef);
  return total;
}

StateDict PipelineContext::model_state(torch::nn::Module& model) {
  return gather_stages(mesh_->pp(), ordinary_layout(model), to_ordinary(model, held_state(model)));
}

bool PipelineContext::save_checkpoint(const fs::path& dir, const TrainState& state,
                                      torch::nn::Module& model, const o::Optimizer& opt, int keep) {
  const StateDict all = ordinary_layout(model);
  const StateDict params = gather_stages(mesh_->pp(), all, to_ordinary(model, held_state(model)));
  Moments moments = state_moments(model, opt);
  for (auto& [field, tensors] : moments)
    tensors = gather_stages(mesh_->pp(), all, to_ordinary(model, tensors));
  if (!is_main()) return true;
  auto twin = ordinary_twin(stage_model(model).config(), params.begin()->second.scalar_type());
  if (auto st = load_state_dict(*twin, params, "the gathered pipeline stages"); !st)
    throw Exception(st.error());
  auto twin_opt = same_kind_optimizer(opt, decay_groups(*twin));
  auto& states = const_cast<o::Optimizer&>(opt).state();
  if (!states.empty()) fill_state(*twin_opt, *twin, *states.begin()->second, moments);
  (void)gpulab::train::save_checkpoint(dir, state, *twin, *twin_opt, keep);
  return true;
}

std::optional<Result<TrainState>> PipelineContext::load_checkpoint(const CheckpointInfo& ckpt,
                                                                   torch::nn::Module& model,
                                                                   o::Optimizer& opt) {
  if (dist::is_sharded_checkpoint(ckpt)) return std::nullopt;  // the trainer's refusal
  const auto dtype = held_parameters(model).front().second.scalar_type();
  auto twin = ordinary_twin(stage_model(model).config(), dtype);
  auto twin_opt = same_kind_optimizer(opt, decay_groups(*twin));
  auto s = gpulab::train::load_checkpoint(ckpt, *twin, *twin_opt);
  if (!s) return s;
  const StateDict whole = to_local(model, module_state_dict(*twin));
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, t] : held_state(model)) t.copy_(whole.at(name));
  }
  Moments moments = state_moments(*twin, *twin_opt);
  for (auto& [field, tensors] : moments) tensors = to_local(model, tensors);
  copy_state(*twin_opt, *twin, opt, model, moments);
  return s;
}

}  // namespace gpulab::train::parallel
