// A one-line progress bar for the batches of an epoch, drawn only when stdout is a terminal
// (logs and pipes get the per-epoch lines alone).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gpulab::train {

class ProgressBar {
 public:
  // `enabled` false (not rank 0, or not a TTY) makes every call a no-op.
  ProgressBar(bool enabled, int64_t total, std::string label);
  // Redraws at most ~10 times per second; `extra` is shown after the bar ("loss 0.4123").
  void update(int64_t done, const std::string& extra);
  // Erases the bar so the next line starts clean.
  void clear();

  static bool stdout_is_tty();

 private:
  bool enabled_;
  int64_t total_;
  std::string label_;
  std::chrono::steady_clock::time_point last_draw_{};
  bool drawn_ = false;
};

}  // namespace gpulab::train
