// A tensor-parallel run's checkpoints through an ordinary twin: the one-process model and an
// optimizer of the same kind and groups, holding the gathered tensors, written and read by the
// ordinary checkpoint code (train/checkpoint.h), so there is one checkpoint format.
#include "train/parallel/tp_checkpoint.h"

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/models/lm_families.h"
#include "train/optim/state_key.h"

namespace gpulab::train::parallel {

namespace o = torch::optim;

// The fields of a parameter's optimizer state shaped like the parameter (the ones TP splits).
std::vector<std::pair<std::string, torch::Tensor*>> moment_fields(
    torch::optim::OptimizerParamState& s) {
  std::vector<std::pair<std::string, torch::Tensor*>> f;
  if (auto* a = dynamic_cast<o::AdamWParamState*>(&s))
    f = {{"exp_avg", &a->exp_avg()},
         {"exp_avg_sq", &a->exp_avg_sq()},
         {"max_exp_avg_sq", &a->max_exp_avg_sq()}};
  else if (auto* b = dynamic_cast<o::AdamParamState*>(&s))
    f = {{"exp_avg", &b->exp_avg()},
         {"exp_avg_sq", &b->exp_avg_sq()},
         {"max_exp_avg_sq", &b->max_exp_avg_sq()}};
  else if (auto* c = dynamic_cast<o::SGDParamState*>(&s))
    f = {{"momentum_buffer", &c->momentum_buffer()}};
  else if (auto* d = dynamic_cast<o::RMSpropParamState*>(&s))
    f = {{"square_avg", &d->square_avg()},
         {"momentum_buffer", &d->momentum_buffer()},
         {"grad_avg", &d->grad_avg()}};
  else
    throw Exception(Code::kUnsupported, "this optimizer's state has no tensor-parallel layout",
                    "use --optimizer adamw, adam, sgd or rmsprop with --tp");
  std::erase_if(f, [](const auto& kv) { return !kv.second->defined(); });
  return f;
}

std::unique_ptr<o::Optimizer> optimizer_like(const o::Optimizer& opt,
                                             std::vector<std::vector<torch::Tensor>> params) {
  std::vector<o::OptimizerParamGroup> groups;
  for (size_t i = 0; i < params.size(); ++i)
    groups.emplace_back(std::move(params[i]), opt.param_groups()[i].options().clone());
  std::unique_ptr<o::Optimizer> out;
  if (auto* a = dynamic_cast<const o::AdamW*>(&opt))
    out = std::make_unique<o::AdamW>(std::move(groups),
                                     static_cast<const o::AdamWOptions&>(a->defaults()));
  else if (auto* b = dynamic_cast<const o::Adam*>(&opt))
    out = std::make_unique<o::Adam>(std::move(groups),
                                    static_cast<const o::AdamOptions&>(b->defaults()));
  else if (auto* c = dynamic_cast<const o::SGD*>(&opt))
    out = std::make_unique<o::SGD>(std::move(groups),
                                   static_cast<const o::SGDOptions&>(c->defaults()));
  else if (auto* d = dynamic_cast<const o::RMSprop*>(&opt))
    out = std::make_unique<o::RMSprop>(std::move(groups),
                                       static_cast<const o::RMSpropOptions&>(d->defaults()));
  else
    throw Exception(Code::kUnsupported, "this optimizer has no tensor-parallel checkpoint",
                    "use --optimizer adamw, adam, sgd or rmsprop with --tp");
  // The constructor merges group options with the defaults (optimizers.cpp): set them again.
  for (size_t i = 0; i < opt.param_groups().size(); ++i)
    out->param_groups()[i].set_options(opt.param_groups()[i].options().clone());
  return out;
}

namespace {

using Moments = std::map<std::string, StateDict>;  // state field -> parameter name -> tensor

// An optimizer of opt's kind over `model`'s parameters, grouped as opt groups the same names,
// with opt's group options (the decay / no-decay groups of make_optimizer).
std::unique_ptr<o::Optimizer> same_optimizer(const o::Optimizer& opt, TpCausalLm& split,
                                             torch::nn::Module& model) {
  std::map<const void*, std::string> name_of;
  for (const auto& p : split.named_parameters()) name_of[p.value().unsafeGetTensorImpl()] = p.key();
  std::vector<std::vector<torch::Tensor>> groups;
  for (const auto& g : opt.param_groups()) {
    std::set<std::string> names;
    for (const auto& p : g.params()) names.insert(name_of.at(p.unsafeGetTensorImpl()));
    std::vector<torch::Tensor> params;  // in the model's order, as make_optimizer lists them
    for (const auto& p : model.named_parameters())
      if (names.count(p.key())) params.push_back(p.value());
    groups.push_back(std::move(params));
  }
  return optimizer_like(opt, std::move(groups));
}

// The one-process model of `split`'s shape, in its dtype, without touching the RNG the
// checkpoint records (building initialises weights).
std::shared_ptr<CausalLm> ordinary_twin(TpCausalLm& split) {
  auto gen = at::detail::getDefaultCPUGenerator();
  torch::Tensor rng;
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng = gen.get_state();
  }
  auto twin = build_causal_lm(split.config());
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(rng);
  }
  for (const auto& p : split.parameters()) {
    twin->to(p.scalar_type());
    break;
  }
  return twin;
}

// opt's state tensors of every parameter of `model`, by field and name.
Moments state_moments(torch::nn::Module& model, const o::Optimizer& opt) {
  Moments m;
  auto& state = const_cast<o::Optimizer&>(opt).state();
  for (const auto& p : model.named_parameters()) {
    auto it = state.find(state_key(p.value()));
    if (it == state.end()) continue;
    for (auto& [field, t] : moment_fields(*it->second)) m[field][p.key()] = *t;
  }
  return m;
}

// For each parameter of `to_model` with state in `from`: a copy of the state of the parameter of
// the same name in `from_model`, its moments replaced by `moments` (already in to's layout).
void copy_state(o::Optimizer& from, torch::nn::Module& from_model, o::Optimizer& to,
                torch::nn::Module& to_model, const Moments& moments) {
  auto from_params = from_model.named_parameters();
  for (const auto& p : to_model.named_parameters()) {
    auto it = from.state().find(state_key(from_params[p.key()]));
    if (it == from.state().end()) continue;
    auto copy = it->second->clone();
    for (auto& [field, t] : moment_fields(*copy)) *t = moments.at(field).at(p.key()).clone();
    to.state()[state_key(p.value())] = std::move(copy);
  }
}

}  // namespace

void save_tp_checkpoint(const fs::path& dir, const TrainState& state, TpCausalLm& model,
                        const torch::optim::Optimizer& opt, int keep, bool writer) {
  const StateDict params = model.gather(module_state_dict(model));
  Moments moments = state_moments(model, opt);
  for (auto& [field, tensors] : moments) tensors = model.gather(tensors);
  if (!writer) return;
  auto twin = ordinary_twin(model);
  if (auto st = load_state_dict(*twin, params, "the gathered tensor-parallel model"); !st)
    throw Exception(st.error());
  auto twin_opt = same_optimizer(opt, model, *twin);
  copy_state(const_cast<o::Optimizer&>(opt), model, *twin_opt, *twin, moments);
  save_checkpoint(dir, state, *twin, *twin_opt, keep);
}

Result<TrainState> load_tp_checkpoint(const CheckpointInfo& ckpt, TpCausalLm& model,
                                      torch::optim::Optimizer& opt) {
  auto twin = ordinary_twin(model);
  auto twin_opt = same_optimizer(opt, model, *twin);
  auto s = load_checkpoint(ckpt, *twin, *twin_opt);
  if (!s) return s;
  if (auto st = load_state_dict(model, model.shard(module_state_dict(*twin)), ckpt.file.string());
      !st)
    return st.error();
  Moments moments = state_moments(*twin, *twin_opt);
  for (auto& [field, tensors] : moments) tensors = model.shard(tensors);
  copy_state(*twin_opt, *twin, opt, model, moments);
  return s;
}

}  // namespace gpulab::train::parallel
