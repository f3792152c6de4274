// Dropping groups with no reward variance (see dynamic_sampling.h).
#include "train/rl/dynamic_sampling.h"

#include <fmt/format.h>

#include <algorithm>

namespace gpulab::train::rl {

Result<GroupFilter> drop_uniform_groups(std::span<const double> rewards, int64_t group_size) {
  if (group_size < 2)
    return Error(Code::kInvalidArgument,
                 fmt::format("a group of {} completions has no advantage", group_size),
                 "sample at least 2 completions per prompt");
  const auto g = static_cast<size_t>(group_size);
  if (rewards.size() % g != 0)
    return Error(Code::kInvalidArgument,
                 fmt::format("{} rewards are not whole groups of {}", rewards.size(), g));
  GroupFilter out;
  for (size_t first = 0; first < rewards.size(); first += g) {
    const auto group = rewards.subspan(first, g);
    const bool uniform =
        std::all_of(group.begin(), group.end(), [&](double r) { return r == group[0]; });
    if (uniform) {
      ++out.dropped;
      continue;
    }
    out.kept_groups.push_back(static_cast<int64_t>(first / g));
    for (size_t i = first; i < first + g; ++i) out.kept_rows.push_back(static_cast<int64_t>(i));
  }
  return out;
}

}  // namespace gpulab::train::rl
