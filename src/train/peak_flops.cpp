// Peak FLOPS for MFU: the datasheet table and the CPU's measured GEMM rate.
#include "train/peak_flops.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <functional>

#include <fmt/format.h>

#include "train/models/cpu_bf16_matmul.h"

namespace gpulab::train {
namespace {

struct Row {
  const char* match;  // lower-case substring of the device name
  const char* label;
  double bf16, fp32, tf32;  // dense TFLOPS (fp16 = bf16 on all of these)
};

// Dense (no sparsity) peaks from NVIDIA's and AMD's datasheets (SXM / OAM parts).
constexpr Row kRows[] = {
    {"h200", "H200", 989.4, 66.9, 494.7},       {"h100", "H100 SXM", 989.4, 66.9, 494.7},
    {"a100", "A100", 312.0, 19.5, 156.0},       {"mi325x", "MI325X", 1307.4, 163.4, 653.7},
    {"mi300x", "MI300X", 1307.4, 163.4, 653.7},
};

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The best rate (FLOP/s) of single n^3 products over 0.25 s, after a warm-up (oneDNN primitive
// creation): ranks starting together measure at once, and the fastest product is the one least
// disturbed by the others.
double best_rate(int64_t n, const std::function<void()>& product) {
  product();
  const auto start = std::chrono::steady_clock::now();
  double best = 0;
  for (int reps = 0; reps < 3 || since(start) < 0.25; ++reps) {
    const auto t0 = std::chrono::steady_clock::now();
    product();
    best = std::max(best, 2.0 * static_cast<double>(n * n * n) / std::max(1e-9, since(t0)));
  }
  return best;
}

}  // namespace

PeakFlops datasheet_peak(const std::string& device_name, const std::string& dtype) {
  const std::string name = lower(device_name);
  for (const Row& r : kRows) {
    if (name.find(r.match) == std::string::npos) continue;
    const double t = dtype == "fp32" ? r.fp32 : dtype == "tf32" ? r.tf32 : r.bf16;
    return {t * 1e12, std::string(r.label) + " " + dtype + " dense (datasheet)"};
  }
  return {};
}

// The best rate of one thread times the threads the model's products use: the peak as datasheets
// count it (a core's rate x cores). One thread's short products find an undisturbed time slice
// even on a loaded machine, where a product spread over every thread rarely does: at load 10 on
// this 2-core VM, 1024^3 on 2 threads measured 45-65 GFLOP/s and 256^3 on one thread 113 (x 2 =
// 226), so the old 2-thread peak printed an MFU of 102 %.
PeakFlops peak_flops(const torch::Device& device, bool bf16) {
  if (!device.is_cpu()) return {};  // the trainer asks datasheet_peak with the device's name
  torch::NoGradGuard no_grad;
  const int64_t n = 256;
  // Without bf16 GEMM kernels the models' bf16 products run on the fp32 GEMM: that is the peak.
  const bool via_fp32 = bf16 && cpu_bf16_gemm_is_slow();
  const auto dtype = bf16 && !via_fp32 ? torch::kBFloat16 : torch::kFloat;
  auto a = torch::randn({n, n}).to(dtype), b = torch::randn({n, n}).to(dtype);
  auto c = torch::empty({n, n}, a.options());
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const double best = best_rate(n, [&] { torch::mm_out(c, a, b); });
  at::set_num_threads(threads);
  return {best * threads,
          fmt::format("measured {}^3 {} GEMM on one thread of this CPU x {} threads{}", n,
                      dtype == torch::kBFloat16 ? "bf16" : "fp32", threads,
                      via_fp32 ? " (its bf16 products run there)" : "")};
}

}  // namespace gpulab::train
