// Tests the GEMM stress test on the CPU: correct products pass, a corrupted one is caught,
// bad options are refused with the valid values.
#include <gtest/gtest.h>

#include "bench/gemm_test.h"
#include "core/subprocess.h"

using namespace gpulab;
using namespace gpulab::bench;

TEST(GemmTest, CpuFp32AllIterationsPass) {
  GemmTestOptions o;
  o.device = "cpu";
  o.size = 96;
  o.iterations = 10;
  auto r = run_gemm_test(o);
  EXPECT_EQ(r.successful, 10);
  EXPECT_DOUBLE_EQ(r.success_rate(), 100.0);
  EXPECT_GT(r.gflops(), 0.0);
  // The fp32 bound of src/bench/gemm_test.cpp: 1e-4 of sum_k |a_ik b_kj| (2^-24 = 6e-8 times a
  // margin for the kernels' summation orders); under it, every sampled entry passed.
  EXPECT_LT(r.max_rel_error, 1e-4);
  // Only the products are timed; the loop around them (with the checks) takes longer.
  EXPECT_GT(r.total_seconds, 0.0);
  EXPECT_GT(r.wall_seconds, r.total_seconds);
  EXPECT_EQ(r.to_json()["wall_seconds"], r.wall_seconds);
  EXPECT_EQ(r.device.device, "cpu");
  EXPECT_GT(r.device.multiprocessor_count, 0);
}

TEST(GemmTest, CpuBf16PassesItsOwnTolerance) {
  GemmTestOptions o;
  o.device = "cpu";
  o.dtype = "bf16";
  o.size = 64;
  o.iterations = 5;
  EXPECT_EQ(run_gemm_test(o).successful, 5);
}

TEST(GemmTest, CorruptedProductIsCounted) {
  GemmTestOptions o;
  o.device = "cpu";
  o.size = 64;
  o.iterations = 6;
  o.fault_iteration = 2;
  auto r = run_gemm_test(o);
  EXPECT_EQ(r.successful, 5);
  // The injected error is 1000 times the fp32 bound (1e-4 of sum |a*b|), reported in those units.
  EXPECT_GT(r.max_rel_error, 1e-2);
}

TEST(GemmTest, BadOptionsAreRefused) {
  GemmTestOptions o;
  o.device = "cpu";
  o.dtype = "fp64";
  EXPECT_THROW(run_gemm_test(o), Exception);
  o.dtype = "fp16";  // libtorch has no CPU fp16 GEMM
  try {
    run_gemm_test(o);
    FAIL() << "fp16 on CPU must be refused";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kUnsupported);
  }
  o.dtype = "fp32";
  o.device = "cuda:7";
  EXPECT_THROW(run_gemm_test(o), Exception);
  o.device = "tpu";
  EXPECT_THROW(run_gemm_test(o), Exception);
}

TEST(GemmTest, CliReportsSeedLines) {
  auto r = run_process(
      {GPULAB_BINARY, "gpu-test", "--device", "cpu", "--size", "64", "--iterations", "5"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->err;
  for (const char* line :
       {"=== GPU Stress Testing Tool ===", "Successful iterations: 5/5", "Success rate: 100.0%",
        "Average performance:", "All tests completed!"}) {
    EXPECT_NE(r->out.find(line), std::string::npos) << line << "\n" << r->out;
  }
  auto bad = run_process({GPULAB_BINARY, "gpu-test", "--dtype", "fp64"});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code, 2);
}
