// Progress of an epoch: a one-line bar with an ETA when stdout is a terminal, and a plain line
// every few seconds otherwise (logs and pipes: step, rate, ETA), so a long run is never silent.
// Beside the epoch's ETA, the run's: the epochs still to come at this epoch's rate.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gpulab::train {

class ProgressBar {
 public:
  // `enabled` false (not rank 0) makes every call a no-op. Without a terminal a line is printed
  // every `line_every_s` seconds.
  ProgressBar(bool enabled, int64_t total, std::string label, double line_every_s = 30.0);
  // Whether update(done, ...) would print now: callers skip building `extra` (a device sync for
  // the loss) when it would not.
  [[nodiscard]] bool due(int64_t done) const;
  // `extra` is shown after the count ("loss 0.4123 850 img/s"); the ETA follows.
  void update(int64_t done, const std::string& extra);
  // Batches of the run's epochs after this one: the ETA then reads "ETA 2m12s, run 20m5s".
  void set_later_batches(int64_t later) { later_ = later; }
  // A resumed epoch's first batch: the ones before it were trained by an earlier run, so the
  // rate counts from here (the count shown stays the epoch's).
  void start_at(int64_t first) { first_ = first; }
  // Erases the bar so the next line starts clean.
  void clear();

  static bool stdout_is_tty();

 private:
  [[nodiscard]] std::string eta(int64_t done) const;

  bool enabled_;
  bool tty_;
  int64_t total_;
  int64_t later_ = 0;
  int64_t first_ = 0;
  std::string label_;
  std::chrono::steady_clock::duration interval_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
  bool drawn_ = false;
};

}  // namespace gpulab::train
