// The schedule simulator: a stage's next action starts when the stage is free and what it needs
// has arrived; it runs until no stage can move.
#include "train/parallel/pipeline_timeline.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpulab::train::parallel {

double Timeline::idle_fraction() const {
  if (makespan <= 0 || busy.empty()) return 0;
  double sum = 0;
  for (double b : busy) sum += b;
  return 1.0 - sum / (static_cast<double>(busy.size()) * makespan);
}

Timeline simulate_pipeline(const PipelineShape& shape,
                           const std::vector<std::vector<PipeAction>>& actions, double forward,
                           double backward) {
  const int p = shape.stages, last = shape.chunks() - 1;
  // When each (op, micro-batch, chunk) finished.
  std::map<std::tuple<PipeOp, int, int>, double> done;
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0);
  Timeline t;
  t.busy.assign(static_cast<size_t>(p), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      const auto& list = actions[static_cast<size_t>(s)];
      auto& i = next[static_cast<size_t>(s)];
      while (i < list.size()) {
        const PipeAction& a = list[i];
        const bool fwd = a.op == PipeOp::kForward;
        // A forward needs the previous chunk's output; a backward its own forward and the next
        // chunk's input gradient (the last chunk's loss is its own).
        std::vector<std::tuple<PipeOp, int, int>> needs;
        if (fwd && a.chunk > 0) needs.emplace_back(PipeOp::kForward, a.micro_batch, a.chunk - 1);
        if (!fwd) needs.emplace_back(PipeOp::kForward, a.micro_batch, a.chunk);
        if (!fwd && a.chunk < last)
          needs.emplace_back(PipeOp::kBackward, a.micro_batch, a.chunk + 1);
        double start = free_at[static_cast<size_t>(s)];
        bool ready = true;
        for (const auto& n : needs) {
          auto it = done.find(n);
          if (it == done.end()) {
            ready = false;
            break;
          }
          start = std::max(start, it->second);
        }
        if (!ready) break;
        const double cost = fwd ? forward : backward;
        done[{a.op, a.micro_batch, a.chunk}] = start + cost;
        free_at[static_cast<size_t>(s)] = start + cost;
        t.busy[static_cast<size_t>(s)] += cost;
        t.makespan = std::max(t.makespan, start + cost);
        ++i;
        moved = true;
      }
    }
  }
  for (int s = 0; s < p; ++s)
    if (next[static_cast<size_t>(s)] < actions[static_cast<size_t>(s)].size()) t.deadlocked = true;
  return t;
}

double ideal_bubble(const PipelineShape& shape) {
  const double p = shape.stages, v = shape.virtual_stages, m = shape.micro_batches;
  return (p - 1) / (v * m + p - 1);
}

}  // namespace gpulab::train::parallel
