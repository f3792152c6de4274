// The table of training tasks: which task a run's options name (task_table.cpp).
#pragma once

#include <memory>

#include "train/tasks/train_task.h"

namespace gpulab::train {

// The task the options name: a language model's, else image classification's.
std::unique_ptr<TrainTask> make_train_task(const TaskEnv& env);

// Every check of a run's options (check_train_options) and then the named task's own (GRPO's
// policy, prompts and rewards), before any rank starts. The Trainer takes options that passed.
Status check_task_options(const TrainOptions& opts, int world_size);

}  // namespace gpulab::train
