// Progress of an epoch: a terminal bar with an ETA, or a line every few seconds in a log.
#include "train/progress.h"

#include <unistd.h>

#include <cstdio>

#include "core/duration.h"

namespace gpulab::train {

using Clock = std::chrono::steady_clock;

ProgressBar::ProgressBar(bool enabled, int64_t total, std::string label, double line_every_s)
    : enabled_(enabled && total > 0),
      tty_(stdout_is_tty()),
      total_(total),
      label_(std::move(label)),
      interval_(tty_ ? Clock::duration(std::chrono::milliseconds(100))
                     : std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(line_every_s))),
      start_(Clock::now()),
      last_draw_(start_) {}

bool ProgressBar::stdout_is_tty() {
  return ::isatty(STDOUT_FILENO) == 1;
}

bool ProgressBar::due(int64_t done) const {
  if (!enabled_) return false;
  const bool waited = Clock::now() - last_draw_ >= interval_;
  // A log gets no line for the last batch: the epoch's own line follows at once.
  if (!tty_) return waited && done < total_;
  return !drawn_ || done >= total_ || waited;
}

std::string ProgressBar::eta(int64_t done) const {
  if (done <= first_) return "ETA ?";
  const double per_batch = std::chrono::duration<double>(Clock::now() - start_).count() /
                           static_cast<double>(done - first_);
  std::string s = "ETA " + human_duration(per_batch * static_cast<double>(total_ - done));
  if (later_ > 0)  // evaluation and checkpoints between epochs are not counted
    s += ", run " + human_duration(per_batch * static_cast<double>(total_ - done + later_));
  return s;
}

void ProgressBar::update(int64_t done, const std::string& extra) {
  if (!due(done)) return;
  last_draw_ = Clock::now();
  drawn_ = true;
  if (!tty_) {
    std::printf("%s: batch %lld/%lld, %s, %s\n", label_.c_str(), static_cast<long long>(done),
                static_cast<long long>(total_), extra.c_str(), eta(done).c_str());
    std::fflush(stdout);
    return;
  }
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - filled - 1), ' ');
  std::printf("\r\033[K%s [%s] %lld/%lld %s %s", label_.c_str(), bar.c_str(),
              static_cast<long long>(done), static_cast<long long>(total_), extra.c_str(),
              eta(done).c_str());
  std::fflush(stdout);
}

void ProgressBar::clear() {
  if (!enabled_ || !drawn_ || !tty_) return;
  std::printf("\r\033[K");
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace gpulab::train
