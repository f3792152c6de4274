// Where a rank's tensor-parallel shard of a tensor lies in the ordinary (one-process) tensor: the
// split dimension, the shard's length along it, and runs of consecutive indices copied from the
// ordinary tensor (one run for a plain split, three for GPT-2's fused q/k/v, none for a rank that
// holds only vocabulary padding). The one description both the shard conversions and the
// per-rank checkpoints (mesh_checkpoint.h) read, so they cannot disagree.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace gpulab::train::parallel {

struct SliceRun {
  int64_t local = 0;   // first index along the split dimension in the shard
  int64_t global = 0;  // the same in the ordinary tensor
  int64_t length = 0;
};

struct TpSlices {
  int dim = -1;            // -1: the rank holds the whole tensor (replicated)
  int64_t local_size = 0;  // the shard's size along `dim` (padding included)
  std::vector<SliceRun> runs;
  // False for a copy another rank holds as well (a replicated tensor on a TP rank after the
  // first, a shared kv head after its first holder): a checkpoint writes each piece once.
  bool first_copy = true;
};

// A whole tensor held by one rank (the ordinary model, a pipeline stage's own tensors).
inline TpSlices whole_tensor() {
  return {};
}

// The shard of `full` (ordinary shape) that `s` describes: zeros where it holds padding.
torch::Tensor shard_by_slices(const torch::Tensor& full, const TpSlices& s);

// A box of an ordinary tensor: where it starts and its size, per dimension.
struct Box {
  std::vector<int64_t> at, size;
  int64_t numel() const;
};

// Where boxes a and b meet; nullopt when they do not.
std::optional<Box> overlap(const Box& a, const Box& b);

// The values boxes of one tensor hold together, or -1 when two of them overlap. Boxes inside a
// tensor that do not overlap and hold its count of values tile it: each value once.
int64_t tiled_values(const std::vector<const Box*>& boxes);

// The box of `t` that starts at `at` and has `size` (a view).
torch::Tensor in_box(const torch::Tensor& t, const std::vector<int64_t>& at,
                     const std::vector<int64_t>& size);

// One of a rank's boxes of a tensor: the box in the ordinary tensor and where it starts in the
// rank's own.
struct Placed {
  Box whole;
  std::vector<int64_t> local_at;
};

// The boxes of the ordinary tensor (of shape `whole`) that a rank's tensor described by `s`
// holds: one per run (none for padding alone), the whole tensor where it is not split.
std::vector<Placed> placements(const TpSlices& s, c10::IntArrayRef whole);

}  // namespace gpulab::train::parallel
