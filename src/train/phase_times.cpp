// Accumulated per-phase wall times and their one-line summary (phase_times.h).
#include "train/phase_times.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpulab::train {

void PhaseTimes::add(const std::string& phase, double seconds) {
  auto it =
      std::find_if(phases_.begin(), phases_.end(), [&](const auto& p) { return p.first == phase; });
  if (it == phases_.end())
    phases_.emplace_back(phase, seconds);
  else
    it->second += seconds;
}

std::string PhaseTimes::line() const {
  std::string s = "Time outside the steady steps:";
  for (size_t i = 0; i < phases_.size(); ++i)
    s += fmt::format("{} {} {:.2f}s", i == 0 ? "" : ",", phases_[i].first, phases_[i].second);
  return s;
}

Json PhaseTimes::to_json() const {
  Json j = Json::object();
  for (const auto& [phase, seconds] : phases_) j[phase] = seconds;
  return j;
}

}  // namespace gpulab::train
