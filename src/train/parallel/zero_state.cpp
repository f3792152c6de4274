// ZeRO's flat-shard optimizer state in the ordinary layout (zero_state.h).
#include "train/parallel/zero_state.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "train/optim/state_key.h"
#include "train/parallel/ordinary_checkpoint.h"

namespace gpulab::train::parallel {

namespace {

// This rank's slice of a flat buffer laid out as g, from a tensor per parameter.
torch::Tensor dp_slice_of(const dist::FlatGroup& g, const std::vector<torch::Tensor>& per_param) {
  auto full = torch::zeros({g.padded_numel()}, per_param.front().options());
  for (size_t i = 0; i < per_param.size(); ++i) g.param_view(full, i).copy_(per_param[i]);
  return full.narrow(0, g.shard_numel() * g.rank(), g.shard_numel()).clone();
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> per_parameter_optimizer(
    dist::ShardedModel& sharded, const torch::optim::Optimizer& opt) {
  std::vector<std::vector<torch::Tensor>> groups(opt.param_groups().size());
  for (auto* g : sharded.groups())
    for (size_t k = 0; k < groups.size(); ++k) {
      bool steps = false;
      for (const auto& p : opt.param_groups()[k].params())
        steps = steps || p.unsafeGetTensorImpl() == g->shard().unsafeGetTensorImpl();
      if (steps) groups[k].insert(groups[k].end(), g->params().begin(), g->params().end());
    }
  return same_kind_optimizer(opt, std::move(groups));
}

std::vector<FlatSlice> zero_slices(dist::ShardedModel& sharded, torch::nn::Module& model, int stage,
                                   StageLayout& layout, const StateDict& ordinary) {
  std::map<const void*, std::string> name_of;
  for (const auto& p : model.named_parameters()) name_of[p.value().unsafeGetTensorImpl()] = p.key();
  const auto& lm = stage_model(model);
  std::vector<FlatSlice> out;
  for (auto* g : sharded.groups()) {
    FlatSlice slice{g->shard(), {}};
    const int64_t lo = g->shard_numel() * g->rank(), hi = lo + g->shard_numel();
    for (size_t i = 0; i < g->params().size(); ++i) {
      const auto& p = g->params()[i];
      const int64_t begin = std::max(lo, g->offset_of(i));
      const int64_t end = std::min(hi, g->offset_of(i) + p.numel());
      if (begin >= end) continue;
      FlatPart part{name_of.at(p.unsafeGetTensorImpl()), begin - lo, end - begin, {}, true};
      const auto whole = ordinary.at(part.name).sizes();
      const auto s = layout.slices(model, part.name, whole);
      part.first_copy = writes_pieces(lm, stage, s, part.name);
      part.runs =
          flat_range_runs(s, whole, p.sizes(), begin - g->offset_of(i), end - g->offset_of(i));
      slice.parts.push_back(std::move(part));
    }
    out.push_back(std::move(slice));
  }
  return out;
}

void params_into_shards(dist::ShardedModel& sharded) {
  torch::NoGradGuard no_grad;
  for (auto* g : sharded.groups()) g->shard().copy_(dp_slice_of(*g, g->params()));
}

void flatten_state(dist::ShardedModel& sharded, torch::optim::Optimizer& from,
                   torch::optim::Optimizer& opt) {
  torch::NoGradGuard no_grad;
  params_into_shards(sharded);
  for (auto* g : sharded.groups()) {
    auto first = from.state().find(state_key(g->params().front()));
    if (first == from.state().end()) continue;
    auto flat = first->second->clone();
    for (auto& [field, t] : moment_fields(*flat)) {
      std::vector<torch::Tensor> per;
      for (const auto& p : g->params())
        for (auto& [f, pt] : moment_fields(*from.state().at(state_key(p))))
          if (f == field) per.push_back(*pt);
      *t = dp_slice_of(*g, per);
    }
    opt.state()[state_key(g->shard())] = std::move(flat);
  }
}

}  // namespace gpulab::train::parallel
