// Where a run's time goes outside its steady steps (set-up, data, model build, the first step's
// warm-up, evaluation, checkpoints, the final save): a 1B model that waits a minute before its
// first step says which part took it.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace gpulab::train {

class PhaseTimes {
 public:
  // Adds seconds to a phase (phases keep the order they were first seen in).
  void add(const std::string& phase, double seconds);
  // Runs fn and adds its wall time to the phase.
  template <typename Fn>
  void time(const std::string& phase, Fn&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    std::forward<Fn>(fn)();
    add(phase, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // "Time outside training steps: set-up 0.12s, data 0.40s, model 3.10s, ..."
  std::string line() const;
  Json to_json() const;  // {"set-up": 0.12, ...}

 private:
  std::vector<std::pair<std::string, double>> phases_;
};

}  // namespace gpulab::train
