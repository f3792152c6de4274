// The table of training tasks: which task a run's options name. A task is a class of its own
// files and one line here; the loop does not change.
#include "train/tasks/task_table.h"

#include "train/models/decoder_config.h"
#include "train/parallel/tp_options.h"
#include "train/tasks/grpo_setup.h"
#include "train/tasks/grpo_task.h"
#include "train/tasks/image_task.h"
#include "train/tasks/lm_task.h"

namespace gpulab::train {

std::unique_ptr<TrainTask> make_train_task(const TaskEnv& env) {
  if (env.opts.task == "grpo") return std::make_unique<GrpoTask>(env);
  if (is_language_model(env.opts.model)) return std::make_unique<LmTask>(env);
  return std::make_unique<ImageTask>(env);
}

Status check_task_options(const TrainOptions& opts, int world_size) {
  if (auto st = check_train_options(opts, world_size); !st) return st;
  if (auto st = parallel::check_model_parallel_options(opts, world_size); !st) return st;
  if (opts.task == "grpo") return check_grpo_options(opts, world_size);
  return ok_status();
}

}  // namespace gpulab::train
