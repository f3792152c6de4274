// The relative error the numeric tests compare against their tolerances: the largest absolute
// difference over the reference's largest magnitude, computed in float64.
#pragma once

#include <torch/torch.h>

namespace gpulab::test {

inline double relative_diff(const torch::Tensor& ours, const torch::Tensor& ref) {
  const auto a = ours.to(torch::kFloat64), b = ref.to(torch::kFloat64);
  const double scale = b.abs().max().item<double>();
  const double diff = (a - b).abs().max().item<double>();
  return scale > 0 ? diff / scale : diff;
}

}  // namespace gpulab::test
