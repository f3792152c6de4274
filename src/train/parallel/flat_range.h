// A flat range of a rank's tensor (one parameter's part of a ZeRO shard) as boxes of the ordinary
// tensor: how each data-parallel rank of a sharded model-parallel run writes its own slice of the
// optimizer moments to a mesh checkpoint and reads it back, so no rank joins, sends or holds
// moments beyond its slice (a 70B model's TP/PP piece holds tens of GB of them).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "train/parallel/tp_slices.h"

namespace gpulab::train::parallel {

// The boxes of a tensor of shape `shape` whose values are its flat elements [begin, end), in
// order: each contiguous in the tensor (at most two per dimension).
std::vector<Box> contiguous_boxes(c10::IntArrayRef shape, int64_t begin, int64_t end);

// One contiguous box of the rank's tensor inside the range, and the ordinary tensor's boxes it
// holds (`placed`: local_at counted inside this box).
struct FlatRun {
  int64_t offset = 0;         // where its values start, counted from the range's begin
  std::vector<int64_t> size;  // its shape
  std::vector<Placed> placed;
};

// The flat elements [begin, end) of a rank's tensor of shape `local` that `s` places in the
// ordinary tensor of shape `whole` (padding holds no box).
std::vector<FlatRun> flat_range_runs(const TpSlices& s, c10::IntArrayRef whole,
                                     c10::IntArrayRef local, int64_t begin, int64_t end);

// A flat tensor of this rank (a ZeRO shard: what its optimizer state is shaped like) and the
// parts of parameters it holds: each part's name, where it starts in the flat tensor, its runs,
// and whether this rank writes it (a first copy: not a replicated tensor's copy on a TP rank after
// the first, nor the tied embedding on a pipeline stage after the first).
struct FlatPart {
  std::string name;
  int64_t at = 0;
  int64_t numel = 0;
  std::vector<FlatRun> runs;
  bool first_copy = true;
};
struct FlatSlice {
  torch::Tensor shard;
  std::vector<FlatPart> parts;
};

// The run's values as a tensor of its shape: a view of `flat`, the range's values from begin.
torch::Tensor run_view(const torch::Tensor& flat, const FlatRun& run);

}  // namespace gpulab::train::parallel
