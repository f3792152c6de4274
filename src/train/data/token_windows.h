// Windows of seq_len + 1 consecutive tokens (packed across document boundaries) cut from a token
// file, as int64 (inputs, targets) batches. The order is a pure function of (seed, step, rank,
// world size): a resumed run asks for step k and gets the same tokens, bitwise.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "train/data/token_file.h"

namespace gpulab::train {

// inputs[b, t] = tokens[start_b + t], targets[b, t] = tokens[start_b + t + 1]; int64, [B, T].
struct TokenBatch {
  torch::Tensor inputs, targets;
};

struct WindowOptions {
  int64_t seq_len = 256;
  int64_t batch_size = 8;  // windows per rank per step
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
};

// Training order. An epoch cuts the file into n = (N - 1) / T non-overlapping windows, starting
// at a per-epoch offset in [0, (N - 1) % T] (so window edges move between epochs), and visits
// them in a seeded per-epoch permutation. Step k of epoch e takes the global batch
// perm[k*B*W, (k+1)*B*W); rank r takes every W-th of it (r, r + W, ...), so the union of the
// ranks' batches is the single process's batch of B*W windows and ranks never share a window
// within an epoch. The tail (n mod B*W windows) is dropped. With gradient accumulation, call
// batch(step * accum + micro).
class TokenWindows {
 public:
  // kInvalidArgument when the file holds fewer than one window, or fewer windows than one
  // global batch (B * W); the message says how many tokens are needed.
  static Result<TokenWindows> create(const TokenFile& file, WindowOptions opts);

  int64_t windows_per_epoch() const { return windows_; }
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t epoch_of(int64_t step) const { return step / steps_per_epoch_; }
  const WindowOptions& options() const { return opts_; }

  // This rank's window starts (token offsets) at global step `step` (0-based, epochs roll over).
  std::vector<int64_t> window_starts(int64_t step);
  TokenBatch batch(int64_t step);

 private:
  TokenWindows(const TokenFile& file, WindowOptions opts);
  void load_epoch(int64_t epoch);

  const TokenFile* file_;
  WindowOptions opts_;
  int64_t windows_ = 0, steps_per_epoch_ = 0;
  int64_t cached_epoch_ = -1, offset_ = 0;
  std::vector<int64_t> perm_;
};

// Validation: the split cut into non-overlapping windows from offset 0, window i on rank
// i mod W; every rank gets the same count (the tail that would leave ranks uneven is dropped),
// in batches of B with a partial last batch, so ranks reduce their losses in step.
class ValWindows {
 public:
  // max_batches < 0: all. kInvalidArgument when a rank would get no window.
  static Result<ValWindows> create(const TokenFile& file, WindowOptions opts,
                                   int64_t max_batches = -1);
  int64_t batches() const { return batches_; }
  int64_t windows_per_rank() const { return per_rank_; }
  TokenBatch batch(int64_t i) const;

 private:
  ValWindows() = default;
  const TokenFile* file_ = nullptr;
  WindowOptions opts_;
  int64_t per_rank_ = 0, batches_ = 0;
};

// Builds a batch from explicit window starts (shared by both orders, and by tests).
TokenBatch gather_windows(const TokenFile& file, const std::vector<int64_t>& starts,
                          int64_t seq_len);

}  // namespace gpulab::train
