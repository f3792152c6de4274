// Terminal progress bar for an epoch.
#include "train/progress.h"

#include <unistd.h>

#include <cstdio>

namespace gpulab::train {

ProgressBar::ProgressBar(bool enabled, int64_t total, std::string label)
    : enabled_(enabled && total > 0), total_(total), label_(std::move(label)) {}

bool ProgressBar::stdout_is_tty() {
  return ::isatty(STDOUT_FILENO) == 1;
}

void ProgressBar::update(int64_t done, const std::string& extra) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(static_cast<size_t>(filled), '=');
  if (filled < kWidth) bar += '>' + std::string(static_cast<size_t>(kWidth - filled - 1), ' ');
  std::printf("\r\033[K%s [%s] %lld/%lld %s", label_.c_str(), bar.c_str(),
              static_cast<long long>(done), static_cast<long long>(total_), extra.c_str());
  std::fflush(stdout);
}

void ProgressBar::clear() {
  if (!enabled_ || !drawn_) return;
  std::printf("\r\033[K");
  std::fflush(stdout);
  drawn_ = false;
}

}  // namespace gpulab::train
