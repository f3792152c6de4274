// The table of training tasks: which task a run's options name (task_table.cpp).
#pragma once

#include <memory>

#include "train/tasks/train_task.h"

namespace gpulab::train {

// The task the options name: a language model's, else image classification's.
std::unique_ptr<TrainTask> make_train_task(const TaskEnv& env);

}  // namespace gpulab::train
