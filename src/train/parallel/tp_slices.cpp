// A shard cut from the ordinary tensor by its slices, and the boxes they hold (tp_slices.h).
#include "train/parallel/tp_slices.h"

#include <algorithm>

namespace gpulab::train::parallel {

torch::Tensor shard_by_slices(const torch::Tensor& full, const TpSlices& s) {
  if (s.dim < 0) return full.clone();
  auto shape = full.sizes().vec();
  shape[static_cast<size_t>(s.dim)] = s.local_size;
  auto out = torch::zeros(shape, full.options());
  for (const auto& r : s.runs)
    out.narrow(s.dim, r.local, r.length).copy_(full.narrow(s.dim, r.global, r.length));
  return out;
}

int64_t Box::numel() const {
  int64_t n = 1;
  for (auto s : size) n *= s;
  return n;
}

int64_t tiled_values(const std::vector<const Box*>& boxes) {
  int64_t n = 0;
  for (size_t i = 0; i < boxes.size(); ++i) {
    for (size_t k = 0; k < i; ++k)
      if (overlap(*boxes[i], *boxes[k])) return -1;
    n += boxes[i]->numel();
  }
  return n;
}

std::optional<Box> overlap(const Box& a, const Box& b) {
  Box o{a.at, a.size};
  for (size_t d = 0; d < a.at.size(); ++d) {
    const int64_t lo = std::max(a.at[d], b.at[d]);
    const int64_t hi = std::min(a.at[d] + a.size[d], b.at[d] + b.size[d]);
    if (hi <= lo) return std::nullopt;
    o.at[d] = lo;
    o.size[d] = hi - lo;
  }
  return o;
}

torch::Tensor in_box(const torch::Tensor& t, const std::vector<int64_t>& at,
                     const std::vector<int64_t>& size) {
  auto v = t;
  for (size_t d = 0; d < at.size(); ++d) v = v.narrow(static_cast<int64_t>(d), at[d], size[d]);
  return v;
}

std::vector<Placed> placements(const TpSlices& s, c10::IntArrayRef whole) {
  const std::vector<int64_t> zero(whole.size(), 0), full = whole.vec();
  if (s.dim < 0) return {{{zero, full}, zero}};
  std::vector<Placed> out;
  const auto d = static_cast<size_t>(s.dim);
  for (const auto& run : s.runs) {
    Placed p{{zero, full}, zero};
    p.whole.at[d] = run.global;
    p.whole.size[d] = run.length;
    p.local_at[d] = run.local;
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace gpulab::train::parallel
