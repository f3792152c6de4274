// The device parity check on the CPU (the device every machine has): float32 against the
// float64 oracle is small but not zero, the same for the "device" and the CPU rows, and the
// worst parameter is named; an unknown model is refused.
#include <gtest/gtest.h>

#include "bench/device_parity.h"
#include "core/error.h"

using namespace gpulab;

TEST(DeviceParity, ResnetOnTheCpuMatchesFloat64) {
  bench::ParityOptions o;
  o.model = "resnet18";
  o.device = "cpu";
  o.batch_size = 4;
  const auto r = bench::run_parity(o);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_EQ(r.parameters, 11181642);  // torchvision's resnet18 with 10 classes
  EXPECT_GT(r.device_error.logits, 0.0) << "float32 and float64 cannot agree to the last bit";
  EXPECT_LT(r.device_error.logits, 1e-4);
  EXPECT_GT(r.device_error.gradients, 0.0);
  EXPECT_LT(r.device_error.gradients, 1e-3);  // seen: 1.7e-4 at batch 4
  EXPECT_FALSE(r.device_error.worst_parameter.empty());
  EXPECT_DOUBLE_EQ(r.device_error.logits, r.cpu_error.logits);
  EXPECT_TRUE(r.passed());
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
