// Optimizer over shards, global-norm clipping, optimizer state accounting.
#include "train/dist/shard_optimizer.h"

namespace gpulab::train::dist {

double clip_shard_grad_norm(Communicator& comm, const std::vector<torch::Tensor>& shards,
                            double max_norm) {
  torch::NoGradGuard no_grad;
  torch::Tensor sq;
  for (const auto& s : shards) {
    if (!s.grad().defined()) continue;
    auto n = s.grad().pow(2).sum().to(torch::kDouble);
    sq = sq.defined() ? sq + n : n;
  }
  auto total = torch::zeros({1}, torch::kDouble);
  if (sq.defined()) total += sq.cpu();
  if (comm.size() > 1) comm.allreduce_sum(total, "all-reduce of the gradient norm");
  const double norm = std::sqrt(total.item<double>());
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0)
    for (const auto& s : shards)
      if (s.grad().defined()) s.grad().mul_(coef);
  return norm;
}

int64_t optimizer_state_bytes(const torch::optim::Optimizer& opt) {
  int64_t bytes = 0;
  for (const auto& [key, state] : opt.state()) {
    (void)key;
    if (auto* sgd = dynamic_cast<const torch::optim::SGDParamState*>(state.get())) {
      if (sgd->momentum_buffer().defined())
        bytes += sgd->momentum_buffer().numel() * sgd->momentum_buffer().element_size();
    } else if (auto* adamw = dynamic_cast<const torch::optim::AdamWParamState*>(state.get())) {
      for (const auto& t : {adamw->exp_avg(), adamw->exp_avg_sq(), adamw->max_exp_avg_sq()})
        if (t.defined()) bytes += t.numel() * t.element_size();
    } else if (auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(state.get())) {
      for (const auto& t : {adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()})
        if (t.defined()) bytes += t.numel() * t.element_size();
    }
  }
  return bytes;
}

}  // namespace gpulab::train::dist
