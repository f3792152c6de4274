// A shard cut from the ordinary tensor by its slices (tp_slices.h).
#include "train/parallel/tp_slices.h"

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

}  // namespace gpulab::train::parallel
