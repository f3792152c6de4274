// DAPO's dynamic sampling: a group whose completions all got the same reward has zero advantage
// everywhere, so it adds no policy gradient (only KL); such groups are dropped before the loss,
// and how many were is reported.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"

namespace gpulab::train::rl {

struct GroupFilter {
  std::vector<int64_t> kept_groups;  // indices of the groups that stay, in order
  std::vector<int64_t> kept_rows;    // their completions' indices (group g: g*G .. g*G+G-1)
  int64_t dropped = 0;               // groups whose rewards were all equal
};

// rewards: G consecutive completions per group. Equal means bit-for-bit equal as doubles (the
// rewards a group shares are the same computation's output: 0/1 checks, one command's number).
// kInvalidArgument for a group size below 2 or a reward count that is not a multiple of it.
Result<GroupFilter> drop_uniform_groups(std::span<const double> rewards, int64_t group_size);

}  // namespace gpulab::train::rl
