// A flat range of a rank's tensor as boxes of the ordinary tensor (flat_range.h).
#include "train/parallel/flat_range.h"

#include <c10/util/accumulate.h>

#include <algorithm>

namespace gpulab::train::parallel {

std::vector<Box> contiguous_boxes(c10::IntArrayRef shape, int64_t begin, int64_t end) {
  const auto n = static_cast<int64_t>(shape.size());
  std::vector<int64_t> stride(static_cast<size_t>(n), 1);
  for (int64_t d = n - 2; d >= 0; --d)
    stride[static_cast<size_t>(d)] = stride[static_cast<size_t>(d + 1)] * shape[d + 1];
  std::vector<Box> out;
  if (n == 0) {  // a scalar: one value
    if (begin < end) out.push_back({});
    return out;
  }
  while (begin < end) {
    std::vector<int64_t> at(static_cast<size_t>(n));
    for (int64_t d = 0, rest = begin; d < n; ++d) {
      at[static_cast<size_t>(d)] = rest / stride[static_cast<size_t>(d)];
      rest %= stride[static_cast<size_t>(d)];
    }
    // The outermost dimension d with every inner index 0 and room for one step of it.
    int64_t d = n - 1;
    for (int64_t e = 0; e < n; ++e) {
      bool aligned = end - begin >= stride[static_cast<size_t>(e)];
      for (int64_t f = e + 1; aligned && f < n; ++f) aligned = at[static_cast<size_t>(f)] == 0;
      if (aligned) {
        d = e;
        break;
      }
    }
    const auto du = static_cast<size_t>(d);
    const int64_t count = std::min(shape[d] - at[du], (end - begin) / stride[du]);
    Box b{at, std::vector<int64_t>(static_cast<size_t>(n), 1)};
    b.size[du] = count;
    for (int64_t f = d + 1; f < n; ++f) b.size[static_cast<size_t>(f)] = shape[f];
    out.push_back(std::move(b));
    begin += count * stride[du];
  }
  return out;
}

std::vector<FlatRun> flat_range_runs(const TpSlices& s, c10::IntArrayRef whole,
                                     c10::IntArrayRef local, int64_t begin, int64_t end) {
  const auto held = placements(s, whole);
  std::vector<FlatRun> out;
  int64_t offset = 0;
  for (auto& b : contiguous_boxes(local, begin, end)) {
    FlatRun run{offset, b.size, {}};
    offset += b.numel();
    for (const auto& p : held) {
      const auto o = overlap(Box{p.local_at, p.whole.size}, b);
      if (!o) continue;
      Placed q{{p.whole.at, o->size}, o->at};
      for (size_t d = 0; d < o->at.size(); ++d) {
        q.whole.at[d] += o->at[d] - p.local_at[d];
        q.local_at[d] -= b.at[d];
      }
      run.placed.push_back(std::move(q));
    }
    out.push_back(std::move(run));
  }
  return out;
}

torch::Tensor run_view(const torch::Tensor& flat, const FlatRun& run) {
  return flat.narrow(0, run.offset, c10::multiply_integers(run.size)).view(run.size);
}

}  // namespace gpulab::train::parallel
