// A tensor-parallel run's checkpoints through an ordinary twin: the one-process model and an
// optimizer of the same kind and groups, holding the gathered tensors, written and read by the
// ordinary checkpoint code (train/checkpoint.h), so there is one checkpoint format.
#include "train/parallel/tp_checkpoint.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/parallel/ordinary_checkpoint.h"

namespace gpulab::train::parallel {

namespace {

namespace o = torch::optim;

// An optimizer of opt's kind over `model`'s parameters, grouped as opt groups the same names
// (the decay / no-decay groups of make_optimizer).
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
  return same_kind_optimizer(opt, std::move(groups));
}

std::shared_ptr<CausalLm> twin_of(TpCausalLm& split) {
  return ordinary_twin(split.config(), split.parameters().front().scalar_type());
}

}  // namespace

void save_tp_checkpoint(const fs::path& dir, const TrainState& state, TpCausalLm& model,
                        const torch::optim::Optimizer& opt, int keep, bool writer) {
  const StateDict params = model.gather(module_state_dict(model));
  Moments moments = state_moments(model, opt);
  for (auto& [field, tensors] : moments) tensors = model.gather(tensors);
  if (!writer) return;
  auto twin = twin_of(model);
  if (auto st = load_state_dict(*twin, params, "the gathered tensor-parallel model"); !st)
    throw Exception(st.error());
  auto twin_opt = same_optimizer(opt, model, *twin);
  copy_state(const_cast<o::Optimizer&>(opt), model, *twin_opt, *twin, moments);
  save_checkpoint(dir, state, *twin, *twin_opt, keep);
}

Result<TrainState> load_tp_checkpoint(const CheckpointInfo& ckpt, TpCausalLm& model,
                                      torch::optim::Optimizer& opt) {
  auto twin = twin_of(model);
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
