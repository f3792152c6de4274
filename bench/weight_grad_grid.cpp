// gpulab's weight-gradient kernel (src/train/ops/weight_grad.h) against libtorch's product for it
// at llama-125m's shapes (1,024 rows: batch 4 x seq 256): float32 against torch::mm (MKL's sgemm),
// bf16 against torch::mm in bf16 (oneDNN) and its widening to float32, which a float32 weight
// needs. Milliseconds a call, the median of five rounds alternating the two, 2 threads; ratio
// above 1: ours faster. Built by hand beside a gpulab tree:
//   T=build/torch-include L=.venv/lib/python3.11/site-packages/torch/lib; g++ -O2 -std=c++20 \
//     bench/weight_grad_grid.cpp src/train/ops/weight_grad.cpp src/train/ops/cpu_kernels.cpp \
//     src/train/parallel_chunks.cpp -fopenmp -Isrc -I$T -I$T/torch/csrc/api/include -L$L \
//     -Wl,-rpath,$L -ltorch_cpu -lc10 -o /tmp/weight_grad_grid && /tmp/weight_grad_grid
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "train/ops/weight_grad.h"
using namespace gpulab::train;

// Milliseconds a call of f, the best of `reps` calls (one call of warm-up).
double best_ms(auto f, int reps) {
  f();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main() {
  torch::set_num_threads(2);
  torch::NoGradGuard ng;
  const int64_t rows = 1024;
  printf("%-6s %-12s %10s %10s %8s %8s\n", "type", "out x in", "libtorch", "ours", "ratio",
         "GFLOP/s");
  for (auto type : {torch::kFloat, torch::kBFloat16})
    for (auto [out, in] :
         {std::pair<int64_t, int64_t>{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}}) {
      const auto g = torch::randn({rows, out}).to(type), x = torch::randn({rows, in}).to(type);
      const int reps = out * in > 10'000'000 ? 3 : 10;
      std::vector<double> theirs, ours;
      for (int round = 0; round < 5; ++round) {
        theirs.push_back(best_ms([&] { (void)torch::mm(g.t(), x).to(torch::kFloat); }, reps));
        ours.push_back(best_ms([&] { (void)weight_grad(g, x); }, reps));
      }
      const double t = median(theirs), o = median(ours);
      printf("%-6s %5ld x %-4ld %8.2f ms %8.2f ms %8.3f %8.0f\n",
             type == torch::kFloat ? "fp32" : "bf16", out, in, t, o, t / o,
             2.0 * rows * out * in / o / 1e6);
    }
}
