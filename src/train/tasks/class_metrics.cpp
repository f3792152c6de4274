// Cross-entropy, accuracy and exact top-k evaluation for the class-predicting tasks.
#include "train/tasks/class_metrics.h"

#include <fmt/format.h>

#include <algorithm>

#include "launch/heartbeat.h"

namespace gpulab::train {

StepLoss class_loss(const torch::Tensor& logits, const torch::Tensor& targets, const TaskEnv& env) {
  // A language model's B x T x V logits are B*T items of V classes; an image model's are N x C.
  const torch::Tensor items = logits.reshape({-1, logits.size(-1)});
  StepLoss s;
  s.loss = torch::nn::functional::cross_entropy(
      items.to(env.compute_dtype), targets,
      torch::nn::functional::CrossEntropyFuncOptions().label_smoothing(env.opts.label_smoothing));
  s.correct = items.detach().argmax(1).eq(targets).sum();
  s.count = targets.size(0);
  return s;
}

// Exact, unpadded evaluation: every held-out item counted once over all ranks (sum, then divide).
namespace {

EvalSums model_sums(Classifier& model, const TaskBatch& batch, const TaskEnv& env) {
  torch::Tensor logits;
  {
    AutocastGuard autocast(env.precision, env.device);
    logits = model.forward(batch.inputs).to(env.compute_dtype);
  }
  logits = logits.reshape({-1, logits.size(-1)});
  const auto& y = batch.targets;
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  auto topk = std::get<1>(logits.topk(k, 1));
  auto hits = topk.eq(y.unsqueeze(1));
  return {torch::nn::functional::cross_entropy(
              logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
              .item<double>(),
          hits.select(1, 0).sum().item<double>(), hits.any(1).sum().item<double>(),
          static_cast<double>(y.size(0))};
}

}  // namespace

void evaluate_classes(Classifier& model, const std::function<std::optional<TaskBatch>()>& next,
                      const TaskEnv& env, EpochRecord& rec, const BatchEvaluator& sums_of) {
  auto sums = torch::zeros({4}, torch::kFloat64);  // loss sum, top-1, top-5, items
  int64_t b = 0;
  while (auto batch = next()) {
    if (env.opts.limit_eval_batches > 0 && b >= env.opts.limit_eval_batches) break;
    launch::heartbeat(fmt::format("evaluation batch {}", ++b));
    const EvalSums s = sums_of ? sums_of(*batch) : model_sums(model, *batch, env);
    for (int64_t i = 0; i < 4; ++i) sums[i] += s[static_cast<size_t>(i)];
  }
  env.dist.all_reduce_sum(sums);
  const double n = std::max(1.0, sums[3].item<double>());
  rec.test_loss = sums[0].item<double>() / n;
  rec.test_top1 = sums[1].item<double>() / n;
  rec.test_top5 = sums[2].item<double>() / n;
  rec.test_images = static_cast<int64_t>(sums[3].item<double>());
}

}  // namespace gpulab::train
