// ZeRO's flat-shard optimizer state as per-parameter state and back (zero_state.h).
#include "train/parallel/zero_state.h"

#include <utility>

#include "train/optim/state_key.h"
#include "train/parallel/ordinary_checkpoint.h"

namespace gpulab::train::parallel {

namespace {

// The whole flat buffer of one state field from every data-parallel rank's slice (each rank
// adds its slice into zeros: exact).
torch::Tensor join_flat(const torch::Tensor& slice, const dist::FlatGroup& g,
                        dist::Communicator& dp) {
  auto full = torch::zeros({g.padded_numel()}, slice.options());
  full.narrow(0, g.shard_numel() * g.rank(), g.shard_numel()).copy_(slice);
  dp.allreduce_sum(full, "checkpoint: joining optimizer state over the data-parallel ranks");
  return full;
}

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

void unflatten_state(dist::ShardedModel& sharded, torch::optim::Optimizer& opt,
                     torch::optim::Optimizer& into, bool keep) {
  torch::NoGradGuard no_grad;
  for (auto* g : sharded.groups()) {
    auto it = opt.state().find(state_key(g->shard()));
    if (it == opt.state().end()) continue;
    // Every rank joins (a collective); a rank that keeps it has a state per parameter to fill.
    std::vector<std::unique_ptr<torch::optim::OptimizerParamState>> per(keep ? g->params().size()
                                                                             : 0);
    for (auto& s : per) s = it->second->clone();
    for (auto& [field, t] : moment_fields(*it->second)) {
      const auto full = join_flat(*t, *g, sharded.comm());
      for (size_t i = 0; i < per.size(); ++i)
        for (auto& [f, pt] : moment_fields(*per[i]))
          if (f == field) *pt = g->param_view(full, i).to(torch::kCPU, false, /*copy=*/true);
    }
    for (size_t i = 0; i < per.size(); ++i)
      into.state()[state_key(g->params()[i])] = std::move(per[i]);
  }
}

void flatten_state(dist::ShardedModel& sharded, torch::optim::Optimizer& from,
                   torch::optim::Optimizer& opt) {
  torch::NoGradGuard no_grad;
  for (auto* g : sharded.groups()) {
    g->shard().copy_(dp_slice_of(*g, g->params()));
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
