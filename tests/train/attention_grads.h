// An attention's output with the gradients of q, k and v, and the check the attention kernels'
// tests hold them to (each within `bound` of the reference's largest element).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "support/tensor_diff.h"

namespace gpulab::train {

struct AttentionGrads {
  torch::Tensor out, dq, dk, dv;
};

inline void expect_attention_close(const AttentionGrads& ours, const AttentionGrads& ref,
                                   double bound, const std::string& what) {
  EXPECT_LE(gpulab::test::relative_diff(ours.out, ref.out), bound) << what << ": output";
  EXPECT_LE(gpulab::test::relative_diff(ours.dq, ref.dq), bound) << what << ": dq";
  EXPECT_LE(gpulab::test::relative_diff(ours.dk, ref.dk), bound) << what << ": dk";
  EXPECT_LE(gpulab::test::relative_diff(ours.dv, ref.dv), bound) << what << ": dv";
}

}  // namespace gpulab::train
