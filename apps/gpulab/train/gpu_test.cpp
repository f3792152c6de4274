// `gpulab gpu-test`: the seed's smart_gpu_test.py done properly (checked GEMMs, GFLOPS, JSON).
#include <cstdio>
#include <iostream>
#include <memory>

#include "bench/gemm_test.h"
#include "commands.h"
#include "core/strings.h"
#include "json_stdout.h"
#include "train_flags.h"

namespace gpulab::cli {

namespace {

void print_report(const bench::GemmTestReport& r) {
  const auto& d = r.device;
  std::printf("=== GPU Stress Testing Tool ===\n");
  if (d.device == "cpu") {
    std::printf("Selected device: cpu (%s)\n", d.name.c_str());
  } else {
    std::printf("Selected GPU %s: %s\n", d.device.substr(d.device.find(':') + 1).c_str(),
                d.name.c_str());
  }
  std::printf("  Total memory: %.2f GB\n", static_cast<double>(d.total_memory_bytes) / (1 << 30));
  std::printf("  Multi-processor count: %lld\n", static_cast<long long>(d.multiprocessor_count));
  std::printf("  Compute capability: %s\n",
              d.compute_capability.empty() ? "n/a" : d.compute_capability.c_str());
  std::printf("  Test: %lldx%lld GEMM, %s, %lld iterations\n", static_cast<long long>(r.size),
              static_cast<long long>(r.size), r.dtype.c_str(),
              static_cast<long long>(r.iterations));
  std::printf("\n=== Test Completed ===\n");
  std::printf("Total time: %.2f seconds\n", r.total_seconds);
  std::printf("Successful iterations: %lld/%lld\n", static_cast<long long>(r.successful),
              static_cast<long long>(r.iterations));
  std::printf("Success rate: %.1f%%\n", r.success_rate());
  std::printf("Average performance: %s GFLOPS\n", with_thousands(r.gflops(), 2).c_str());
  std::printf("Max sampled relative error: %.3g\n", r.max_rel_error);
  if (r.successful == r.iterations) {
    std::printf("\n\u2713 All tests completed!\n");
  } else {
    std::printf("\n\u2717 %lld iterations produced wrong results\n",
                static_cast<long long>(r.iterations - r.successful));
  }
}

}  // namespace

void add_gpu_test_command(CLI::App& app, CommandContext& ctx) {
  auto opts = std::make_shared<bench::GemmTestOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand("gpu-test", "GEMM stress test: checked products, time, GFLOPS");
  add_shared_flag(cmd, "device", opts->device);
  cmd->add_option("--dtype", opts->dtype, "fp32, tf32, bf16 or fp16")
      ->check(CLI::IsMember({"fp32", "tf32", "bf16", "fp16"}))
      ->capture_default_str();
  cmd->add_option("--size", opts->size, "matrix size n (n x n times n x n)")->capture_default_str();
  cmd->add_option("--iterations", opts->iterations, "number of products")->capture_default_str();
  cmd->add_option("--samples", opts->samples, "entries checked per product")->capture_default_str();
  add_shared_flag(cmd, "seed", opts->seed);
  cmd->add_flag("--json", *json, "print the report as JSON");
  cmd->callback([opts, json, &ctx] {
    JsonStdout out(*json);
    auto report = bench::run_gemm_test(*opts);
    if (*json) {
      out.emit(report.to_json().dump(2));
    } else {
      print_report(report);
    }
    if (report.successful != report.iterations) ctx.exit_code = 1;
  });
}

}  // namespace gpulab::cli
