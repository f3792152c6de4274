// The device parity check: the CPU's float32 error against the float64 oracle is small but not
// zero and names the worst parameter; on a GPU the device row is measured the same way. A
// machine without a GPU cannot judge the device row (its "device" would be the CPU, compared
// with itself): that test skips with the reason tests/allowed-skips.txt names. A tight tolerance
// fails; an unknown model is refused.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdio>

#include "bench/device_parity.h"
#include "core/error.h"

using namespace gpulab;

TEST(DeviceParity, ResnetCpuFloat32MatchesFloat64) {
  bench::ParityOptions o;
  o.model = "resnet18";
  o.device = "cpu";
  o.batch_size = 4;
  const auto r = bench::run_parity(o);
  EXPECT_EQ(r.parameters, 11181642);  // torchvision's resnet18 with 10 classes
  // float32 against float64 through ~20 layers: a relative error of a few 2^-24 (6e-8) per
  // layer; seen 7.6e-6 for the logits and 1.7e-4 for the gradients at batch 4 (train-mode
  // BatchNorm over layer4's 1x1 maps amplifies), so 1e-4 and 1e-3 leave about 10x.
  EXPECT_GT(r.cpu_error.logits, 0.0) << "float32 and float64 cannot agree to the last bit";
  EXPECT_LT(r.cpu_error.logits, 1e-4);
  EXPECT_GT(r.cpu_error.gradients, 0.0);
  EXPECT_LT(r.cpu_error.gradients, 1e-3);
  EXPECT_FALSE(r.cpu_error.worst_parameter.empty());
  std::printf("[device-parity] cpu float32 vs float64: logits %.3g, gradients %.3g (%s)\n",
              r.cpu_error.logits, r.cpu_error.gradients, r.cpu_error.worst_parameter.c_str());
}

TEST(DeviceParity, DeviceRowOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU: the device row cannot be judged";
  bench::ParityOptions o;
  o.model = "resnet18";
  o.device = "cuda";
  o.batch_size = 4;
  const auto r = bench::run_parity(o);
  EXPECT_NE(r.device, "cpu");
  EXPECT_GT(r.device_error.logits, 0.0);
  EXPECT_TRUE(r.passed()) << r.summary();
  EXPECT_TRUE(r.to_json()["passed"].get<bool>());
}

TEST(DeviceParity, LanguageModelAndATightToleranceFails) {
  bench::ParityOptions o;
  o.model = "llama-tiny";
  o.device = "cpu";
  o.batch_size = 2;
  o.seq_len = 16;
  o.tolerance = 1e-12;  // float32 cannot meet it: the check can fail
  const auto r = bench::run_parity(o);
  EXPECT_GT(r.device_error.logits, 0.0);
  EXPECT_LT(r.device_error.logits, 1e-4);
  EXPECT_FALSE(r.passed());
  EXPECT_NE(r.summary().find("FAIL"), std::string::npos) << r.summary();
}

TEST(DeviceParity, UnknownModelAndTooSmallABatchAreRefused) {
  bench::ParityOptions o;
  o.model = "resnet19";
  o.device = "cpu";
  EXPECT_THROW(bench::run_parity(o), Exception);
  o.model = "resnet18";
  o.batch_size = 2;
  EXPECT_THROW(bench::run_parity(o), Exception);
}
