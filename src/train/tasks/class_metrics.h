// The loss and held-out figures of a task that predicts one class per item (an image's label, a
// position's next token): cross-entropy with label smoothing, next-item accuracy, and exact
// top-1 / top-5 over every held-out item of every rank.
#pragma once

#include <array>
#include <functional>
#include <optional>

#include "train/tasks/train_task.h"

namespace gpulab::train {

// Logits N x C (or any ... x C, flattened to items) against N targets, in env's compute dtype.
StepLoss class_loss(const torch::Tensor& logits, const torch::Tensor& targets, const TaskEnv& env);

// A held-out batch's sums: summed cross-entropy, top-1 hits, top-5 hits, items.
using EvalSums = std::array<double, 4>;
using BatchEvaluator = std::function<EvalSums(const TaskBatch&)>;

// Runs the model over the held-out batches next() yields (at most --limit_eval_batches) and sets
// rec's test loss, top-1, top-5 and item count, summed over ranks before dividing. `sums_of`,
// when given, evaluates a batch instead of the model's forward (a pipeline stage's share).
void evaluate_classes(Classifier& model, const std::function<std::optional<TaskBatch>()>& next,
                      const TaskEnv& env, EpochRecord& rec, const BatchEvaluator& sums_of = {});

}  // namespace gpulab::train
