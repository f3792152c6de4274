// The GPU stress test (`gpulab gpu-test`): repeated square GEMMs on one device, each product
// checked on sampled entries against a float64 reference; reports time, success and GFLOPS.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/json.h"
#include "train/device_info.h"

namespace gpulab::bench {

using train::describe_device;
using train::DeviceInfo;

struct GemmTestOptions {
  std::string device = "auto";
  std::string dtype = "fp32";  // fp32 | tf32 | bf16 | fp16
  int64_t size = 2048;
  int64_t iterations = 5000;
  int64_t samples = 64;  // entries checked per product
  uint64_t seed = 1234;
  int64_t warmup = 3;  // products run before timing starts (kernel selection, caches)
  // Test hook: corrupts one sampled entry of this product, to prove the check catches errors.
  int64_t fault_iteration = -1;
};

struct GemmTestReport {
  DeviceInfo device;
  std::string dtype;
  int64_t size = 0;
  int64_t iterations = 0;
  int64_t successful = 0;
  double total_seconds = 0;  // the products alone (what GFLOPS divides by)
  double wall_seconds = 0;   // the whole loop, the per-product checks included
  double max_rel_error = 0;  // worst sampled error over the bound it had to meet
  double success_rate() const { return iterations ? 100.0 * successful / iterations : 0; }
  // 2*n^3 FLOPs per product, over the successful products only (as the seed counts).
  double gflops() const;
  Json to_json() const;
};

// Validates options (throws gpulab::Exception kInvalidArgument with the valid values) and runs.
GemmTestReport run_gemm_test(const GemmTestOptions& opts);

}  // namespace gpulab::bench
