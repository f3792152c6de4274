// Stochastic depth in EfficientNet and ConvNeXt: active only in training, and only when its
// probability is above zero (ModelOptions::stochastic_depth = 0 switches it off for parity runs).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "train/models/registry.h"

namespace gpulab::train {
namespace {

torch::Tensor run_model(Classifier& model, const torch::Tensor& x, uint64_t seed) {
  torch::manual_seed(seed);
  return model.forward(x).detach();
}

class StochasticDepth : public ::testing::TestWithParam<const char*> {};

TEST_P(StochasticDepth, DropsBranchesOnlyWhileTraining) {
  torch::manual_seed(0);
  const auto x = torch::randn({4, 3, 32, 32});
  ModelOptions o;
  o.num_classes = 5;
  o.dropout = 0;
  o.stochastic_depth = 0.5;
  auto model = create_model(GetParam(), o);

  model->eval();
  EXPECT_TRUE(torch::equal(run_model(*model, x, 1), run_model(*model, x, 2)))
      << "random in eval mode";

  model->train();
  EXPECT_FALSE(torch::equal(run_model(*model, x, 1), run_model(*model, x, 2)))
      << "no branch was dropped";
  EXPECT_TRUE(torch::equal(run_model(*model, x, 3), run_model(*model, x, 3)))
      << "not driven by torch's RNG";

  o.stochastic_depth = 0;
  auto off = create_model(GetParam(), o);
  off->train();
  EXPECT_TRUE(torch::equal(run_model(*off, x, 1), run_model(*off, x, 2)))
      << "random with probability 0";
}

INSTANTIATE_TEST_SUITE_P(PartB, StochasticDepth,
                         ::testing::Values("efficientnet_b0", "convnext_tiny"));

}  // namespace
}  // namespace gpulab::train
