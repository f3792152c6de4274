// A tensor-parallel model's gradient sums and norm (see tp_gradients.h).
#include "train/parallel/tp_gradients.h"

#include <algorithm>
#include <cmath>

namespace gpulab::train::parallel {

torch::Tensor flatten_together(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : ts) flat.push_back(t.reshape({-1}));
  return torch::cat(flat);
}

void unflatten_into(const torch::Tensor& flat, std::vector<torch::Tensor>& ts) {
  int64_t offset = 0;
  for (auto& t : ts) {
    t.copy_(flat.narrow(0, offset, t.numel()).view_as(t));
    offset += t.numel();
  }
}

void allreduce_sum_together(std::vector<torch::Tensor>& ts, TpGroup& group, const char* what) {
  if (ts.empty()) return;
  auto sum = flatten_together(ts);
  group.allreduce_sum(sum, what);
  unflatten_into(sum, ts);
}

double clip_tp_gradients(const std::vector<torch::Tensor>& split,
                         const std::vector<torch::Tensor>& replicated,
                         const std::vector<torch::Tensor>& scaled, double max_norm,
                         dist::Communicator* disjoint, TpGroup& group) {
  auto sums = torch::zeros({2}, torch::kDouble);  // split, replicated
  for (const auto& g : split) sums[0] += g.to(torch::kDouble).square().sum();
  for (const auto& g : replicated) sums[1] += g.to(torch::kDouble).square().sum();
  if (disjoint != nullptr) disjoint->allreduce_sum(sums, "gradient norm (data-parallel shards)");
  auto whole = sums.narrow(0, 0, 1).clone();
  group.allreduce_sum(whole, "gradient norm");
  const double norm = std::sqrt((whole.sum() + sums[1]).item<double>());
  // torch::nn::utils::clip_grad_norm_'s coefficient, clamped at 1 (a product by 1 changes no
  // bit, so that pass is skipped: an unbounded call measures the norm alone).
  const double coef = std::min(1.0, max_norm / (norm + 1e-6));
  if (coef < 1.0)
    for (const auto& g : scaled) g.mul_(coef);
  return norm;
}

}  // namespace gpulab::train::parallel
