// A tensor-parallel rank's checkpoints read (tp_checkpoint.h): mesh ones by their pieces,
// ordinary ones through the one-process twin and an optimizer of the same kind and groups.
#include "train/parallel/tp_checkpoint.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/parallel/ordinary_checkpoint.h"
#include "train/parallel/tp_stage_layout.h"

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

Result<TrainState> load_tp_checkpoint(const CheckpointInfo& ckpt, TpCausalLm& model,
                                      torch::optim::Optimizer& opt) {
  if (is_mesh_checkpoint(ckpt)) {
    TpStageLayout layout;
    return load_mesh_checkpoint(ckpt, model, opt, layout);
  }
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
