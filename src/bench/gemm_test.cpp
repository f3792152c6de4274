// GEMM stress test. The inputs stay fixed, so the reference for the sampled entries is computed
// once in float64; each product is then checked on the device with a gather and a compare that
// queue behind the GEMM without a host sync, and the verdicts are read back once at the end.
// Only the products are timed (as torch.matmul is timed alone): the checks stay outside.
#include "bench/gemm_test.h"

#include <chrono>

#include "core/error.h"
#include "train/device.h"

#include <vector>

#if defined(GPULAB_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace gpulab::bench {

namespace {

torch::Dtype gemm_dtype(const std::string& name) {
  if (name == "fp32" || name == "tf32") return torch::kFloat32;
  if (name == "bf16") return torch::kBFloat16;
  if (name == "fp16") return torch::kFloat16;
  throw Exception(Code::kInvalidArgument, "unknown --dtype '" + name + "'",
                  "valid values: fp32, tf32, bf16, fp16");
}

// Error bound relative to sum_k |a_ik * b_kj|: the unit roundoff of the input type times a
// margin for accumulation order (tensor cores and blocked CPU kernels sum in different orders).
double tolerance(const std::string& dtype) {
  if (dtype == "fp32") return 1e-4;
  if (dtype == "tf32") return 4e-3;
  if (dtype == "bf16") return 3e-2;
  return 4e-3;  // fp16
}

void synchronize(const torch::Device& device) {
#if defined(GPULAB_WITH_CUDA)
  if (device.is_cuda()) at::cuda::getCurrentCUDAStream(device.index()).synchronize();
#else
  (void)device;
#endif
}

void set_tf32(const torch::Device& device, bool allow) {
  if (device.is_cuda()) at::globalContext().setAllowTF32CuBLAS(allow);
}

// Sums the time of the products alone. On the CPU a product is done when mm_out returns, so a
// clock around it is exact; on a GPU, timing events on the stream bracket each product, and the
// check kernels queued between two products fall outside every bracket.
class ProductTimer {
 public:
  ProductTimer(const torch::Device& device, int64_t products) : cuda_(device.is_cuda()) {
#if defined(GPULAB_WITH_CUDA)
    if (cuda_) events_.reserve(static_cast<size_t>(2 * products));
#else
    (void)products;
#endif
  }
  void begin() {
#if defined(GPULAB_WITH_CUDA)
    if (cuda_) {
      events_.emplace_back(cudaEventDefault).record();  // default flags: timing on
      return;
    }
#endif
    t0_ = std::chrono::steady_clock::now();
  }
  void end() {
#if defined(GPULAB_WITH_CUDA)
    if (cuda_) {
      events_.emplace_back(cudaEventDefault).record();
      return;
    }
#endif
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }
  // Call after the device is synchronized.
  double seconds() const {
#if defined(GPULAB_WITH_CUDA)
    if (cuda_) {
      double ms = 0;
      for (size_t i = 0; i + 1 < events_.size(); i += 2)
        ms += events_[i].elapsed_time(events_[i + 1]);
      return ms / 1e3;
    }
#endif
    return seconds_;
  }

 private:
  bool cuda_;
  std::chrono::steady_clock::time_point t0_;
  double seconds_ = 0;
#if defined(GPULAB_WITH_CUDA)
  std::vector<at::cuda::CUDAEvent> events_;
#endif
};

}  // namespace

double GemmTestReport::gflops() const {
  if (total_seconds <= 0) return 0;
  double n = static_cast<double>(size);
  return 2.0 * n * n * n * static_cast<double>(successful) / total_seconds / 1e9;
}

Json GemmTestReport::to_json() const {
  return Json{{"device", device.to_json()},
              {"dtype", dtype},
              {"size", size},
              {"iterations", iterations},
              {"successful_iterations", successful},
              {"success_rate_percent", success_rate()},
              {"total_seconds", total_seconds},
              {"wall_seconds", wall_seconds},
              {"average_gflops", gflops()},
              {"max_relative_error", max_rel_error}};
}

GemmTestReport run_gemm_test(const GemmTestOptions& opts) {
  const torch::Dtype dtype = gemm_dtype(opts.dtype);
  if (opts.size < 1 || opts.size > 65536) {
    throw Exception(Code::kInvalidArgument, "--size must be between 1 and 65536",
                    "the seed's default is 2048");
  }
  if (opts.iterations < 1) throw Exception(Code::kInvalidArgument, "--iterations must be >= 1");
  torch::Device device = train::resolve_device(opts.device);
  if (device.is_cpu()) {
    train::configure_threads();
    if (dtype == torch::kFloat16) {
      throw Exception(Code::kUnsupported, "fp16 GEMM is not implemented on the CPU by libtorch",
                      "use --dtype fp32 or bf16 on a CPU, or run on a GPU");
    }
  }
  set_tf32(device, opts.dtype == "tf32");

  GemmTestReport report;
  report.device = describe_device(device);
  report.dtype = opts.dtype;
  report.size = opts.size;
  report.iterations = opts.iterations;

  torch::manual_seed(opts.seed);
  const int64_t n = opts.size;
  auto a64 = torch::randn({n, n}, torch::kFloat64);
  auto b64 = torch::randn({n, n}, torch::kFloat64);
  // Round the inputs to the tested type first, so the reference sees exactly what the GEMM sees.
  auto a = a64.to(dtype).to(device);
  auto b = b64.to(dtype).to(device);
  auto ar = a.to(torch::kCPU).to(torch::kFloat64);
  auto br = b.to(torch::kCPU).to(torch::kFloat64);

  const int64_t k = std::min<int64_t>(opts.samples, n * n);
  auto rows = torch::randint(0, n, {k}, torch::kLong);
  auto cols = torch::randint(0, n, {k}, torch::kLong);
  auto a_rows = ar.index_select(0, rows);      // k x n
  auto b_cols = br.index_select(1, cols).t();  // k x n
  auto ref = (a_rows * b_cols).sum(1);         // exact-ish dot products
  auto bound = (a_rows.abs() * b_cols.abs()).sum(1) * tolerance(opts.dtype) + 1e-30;
  auto rows_d = rows.to(device), cols_d = cols.to(device);
  auto ref_d = ref.to(device, torch::kFloat32), bound_d = bound.to(device, torch::kFloat32);

  auto c = torch::empty({n, n}, a.options());
  for (int64_t i = 0; i < opts.warmup; ++i) torch::mm_out(c, a, b);
  synchronize(device);

  // One verdict per product, written on the device: 1 if every sampled entry is within bound.
  auto verdicts =
      torch::zeros({opts.iterations}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
  auto worst = torch::zeros({}, verdicts.options());
  ProductTimer timer(device, opts.iterations);
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < opts.iterations; ++i) {
    timer.begin();
    torch::mm_out(c, a, b);
    timer.end();
    if (i == opts.fault_iteration)
      c.index_put_({rows_d[0], cols_d[0]}, c.index({rows_d[0], cols_d[0]}) + 1e3 * bound_d[0]);
    auto got = c.index({rows_d, cols_d}).to(torch::kFloat32);
    auto rel_max = ((got - ref_d).abs() / bound_d).max();
    verdicts[i] = (rel_max <= 1.0).to(torch::kFloat32);
    worst = torch::maximum(worst, rel_max);
  }
  synchronize(device);
  auto t1 = std::chrono::steady_clock::now();
  report.total_seconds = timer.seconds();
  report.wall_seconds = std::chrono::duration<double>(t1 - t0).count();
  report.successful = static_cast<int64_t>(verdicts.sum().item<double>());
  report.max_rel_error = worst.item<double>() * tolerance(opts.dtype);
  return report;
}

}  // namespace gpulab::bench
