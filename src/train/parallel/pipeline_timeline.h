// What a pipeline schedule costs (no libtorch): every stage runs its actions in order, each
// forward taking `forward` and each backward `backward` time units per chunk, and waits only for
// the activation or gradient it receives (sends never block, as the executor's asynchronous sends
// do not). The idle fraction this gives is the schedule's bubble: (P-1)/(M+P-1) for 1F1B with M
// micro-batches on P equal stages. It also finds a schedule that would deadlock.
#pragma once

#include <vector>

#include "train/parallel/pipeline_schedule.h"

namespace gpulab::train::parallel {

struct Timeline {
  double makespan = 0;       // when the last stage finishes
  std::vector<double> busy;  // per stage: time spent computing
  bool deadlocked = false;   // some stage waits for what no stage will send
  // Idle time over all stages' time: 1 - sum(busy) / (stages · makespan).
  double idle_fraction() const;
};

// `actions[s]` is stage s's list (pipeline_schedule, or what an executor recorded).
Timeline simulate_pipeline(const PipelineShape& shape,
                           const std::vector<std::vector<PipeAction>>& actions, double forward = 1,
                           double backward = 2);

// The bubble of 1F1B and of its interleaved form on equal stages: (P-1) / (V·M + P-1), V the
// virtual stages (each chunk's share of the work is 1/V of a stage's, so the fill and drain cost
// 1/V as much; Narayanan et al. 2021).
double ideal_bubble(const PipelineShape& shape);

}  // namespace gpulab::train::parallel
