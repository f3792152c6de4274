// The vocabulary-parallel cross-entropy as one autograd function: two reductions forward (a max,
// then the target logit and the sum of exponentials together), none backward.
#include "train/parallel/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"

namespace gpulab::train::parallel {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCe : torch::autograd::Function<VocabParallelCe> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& target, int64_t group, int64_t start,
                               int64_t vocab, double smoothing) {
    auto& g = TpGroup::from_id(group);
    const int64_t cols = logits.size(-1);
    const int64_t valid = std::clamp<int64_t>(vocab - start, 0, cols);
    auto z = logits.detach().clone(at::MemoryFormat::Contiguous);
    if (valid < cols)
      z.narrow(-1, valid, cols - valid).fill_(-std::numeric_limits<double>::infinity());
    // The shift only keeps exp() in range; the group's one max makes it the same everywhere.
    auto max = std::get<0>(z.max(-1));
    g.allreduce_max(max, "vocab-parallel cross-entropy (max)");
    z.sub_(max.unsqueeze(-1));
    auto mine = (target >= start) & (target < start + valid);
    auto local = (target - start).masked_fill(~mine, 0);
    auto picked = z.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(~mine, 0.0);
    // Label smoothing's mean of -log p needs the logits' sum too (only then: the default's
    // all-reduce keeps its size).
    std::vector<torch::Tensor> parts = {picked};
    const auto zsum = smoothing > 0 ? z.narrow(-1, 0, valid).sum(-1) : torch::Tensor();
    auto e = z.exp_();
    parts.push_back(e.sum(-1));
    if (smoothing > 0) parts.push_back(zsum);
    auto sums = torch::stack(parts);
    g.allreduce_sum(sums, "vocab-parallel cross-entropy (sums)");
    auto keep = target != kIgnoreIndex;
    const auto log_sum = sums[1].log();
    auto loss = log_sum - sums[0];
    // -mean_c log p_c = log sum exp - mean_c z_c, over the vocabulary's real columns.
    if (smoothing > 0)
      loss = (1 - smoothing) * loss + smoothing * (log_sum - sums[2] / static_cast<double>(vocab));
    loss.masked_fill_(~keep, 0.0);
    e.div_(sums[1].unsqueeze(-1));  // this rank's columns of the softmax
    ctx->save_for_backward({e, local, mine, keep});
    ctx->saved_data["smoothing"] = smoothing;
    ctx->saved_data["valid"] = valid;
    ctx->saved_data["vocab"] = vocab;
    return loss;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    auto saved = ctx->get_saved_variables();
    auto& softmax = saved[0];
    const double s = ctx->saved_data["smoothing"].toDouble();
    // d/dz of the smoothed loss: softmax - (1 - s) onehot - s / V on the real columns.
    auto onehot = torch::zeros_like(softmax).scatter_(
        -1, saved[1].unsqueeze(-1), saved[2].unsqueeze(-1).to(softmax.scalar_type()) * (1 - s));
    if (s > 0)
      onehot.narrow(-1, 0, ctx->saved_data["valid"].toInt())
          .add_(s / static_cast<double>(ctx->saved_data["vocab"].toInt()));
    auto weight = grad[0] * saved[3].to(grad[0].scalar_type());
    return {(softmax - onehot) * weight.unsqueeze(-1),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor vocab_parallel_cross_entropy(const torch::Tensor& logits, const torch::Tensor& target,
                                           TpGroup& group, int64_t vocab_start, int64_t vocab_size,
                                           double smoothing) {
  const auto bad = (target != kIgnoreIndex) & ((target < 0) | (target >= vocab_size));
  if (bad.any().item<bool>())
    throw Exception(Code::kInvalidArgument,
                    "a target id is outside the vocabulary of " + std::to_string(vocab_size),
                    "use ids below the vocabulary size, or -100 for positions without a loss");
  GPULAB_ASSERT(logits.sizes().slice(0, logits.dim() - 1) == target.sizes(),
                "vocab_parallel_cross_entropy: logits and target shapes differ");
  return VocabParallelCe::apply(logits, target, group.id(), vocab_start, vocab_size, smoothing);
}

}  // namespace gpulab::train::parallel

namespace gpulab::train::parallel {

torch::Tensor vocab_parallel_mean_loss(const torch::Tensor& logits, const torch::Tensor& target,
                                       TpGroup& group, int64_t vocab_start, int64_t vocab_size,
                                       double smoothing) {
  const auto items = logits.reshape({-1, logits.size(-1)});
  const auto y = target.reshape({-1});
  auto per = vocab_parallel_cross_entropy(items, y, group, vocab_start, vocab_size, smoothing);
  return per.sum() / (y != kIgnoreIndex).sum().clamp_min(1);
}

torch::Tensor vocab_parallel_argmax(const torch::Tensor& logits, TpGroup& group,
                                    int64_t vocab_start, int64_t vocab_size) {
  const int64_t cols = logits.size(-1);
  const int64_t valid = std::clamp<int64_t>(vocab_size - vocab_start, 0, cols);
  auto z = logits.detach().clone(at::MemoryFormat::Contiguous);
  if (valid < cols)
    z.narrow(-1, valid, cols - valid).fill_(-std::numeric_limits<double>::infinity());
  auto local = z.argmax(-1);
  auto best = z.gather(-1, local.unsqueeze(-1)).squeeze(-1);
  auto top = best.clone();
  group.allreduce_max(top, "vocab-parallel argmax (max)");
  // Of the ranks holding the maximum, the lowest global index wins (argmax's first maximum):
  // the max of the negated candidates.
  auto candidate = torch::where(best == top, -(local + vocab_start),
                                torch::full_like(local, std::numeric_limits<int64_t>::min()));
  group.allreduce_max(candidate, "vocab-parallel argmax (index)");
  return -candidate;
}

}  // namespace gpulab::train::parallel
