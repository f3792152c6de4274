// The float32 error bound the CPU kernels' products are held to (small_rows_linear_test.cpp,
// packed_linear_test.cpp): |y - x w^T| <= (k + 2) u (|x| |w|^T) elementwise, u = 2^-24, a float32
// dot product's bound gamma_k in any summation order with room for its final rounding.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

inline void expect_within_rounding(const torch::Tensor& y, const torch::Tensor& x,
                                   const torch::Tensor& w) {
  const auto xd = x.to(torch::kDouble), wd = w.to(torch::kDouble);
  const auto err = (y.to(torch::kDouble) - torch::matmul(xd, wd.t())).abs();
  const auto bound = torch::matmul(xd.abs(), wd.abs().t()) * ((w.size(1) + 2) * 0x1p-24);
  EXPECT_TRUE((err <= bound).all().item<bool>())
      << "rows " << x.numel() / w.size(1) << " n " << w.size(0) << " k " << w.size(1)
      << ": worst excess " << (err - bound).max().item<double>();
}
