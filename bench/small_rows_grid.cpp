// The few-rows product (src/train/ops/small_rows_linear.h) against libtorch's torch::linear over a
// grid of weight shapes and row counts: BLAS time / ours (above 1: ours faster), the median of
// three rounds, 2 threads. It chose kFewRows and kLargeWeight. Built by hand beside a gpulab tree:
//   T=build/torch-include L=.venv/lib/python3.11/site-packages/torch/lib; g++ -O2 -std=c++20 \
//     bench/small_rows_grid.cpp src/train/ops/small_rows_linear.cpp src/train/ops/cpu_kernels.cpp \
//     src/train/precision.cpp -Isrc -I$T -I$T/torch/csrc/api/include -L$L -Wl,-rpath,$L -ltorch_cpu
//     \ -lc10 -o /tmp/small_rows_grid && /tmp/small_rows_grid
#include <torch/torch.h>
#include <chrono>
#include <cstdio>
#include "train/ops/small_rows_linear.h"
using namespace gpulab::train;
// Milliseconds a call of f, over `reps` calls after three of warm-up.
double ms(auto f, int reps) {
  for (int i = 0; i < 3; ++i) f();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) f();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         reps;
}
int main() {
  torch::set_num_threads(2);
  torch::NoGradGuard ng;
  printf("%-12s %8s", "N x K", "elems");
  for (int M : {1, 2, 4, 8, 16, 32, 64}) printf("   M=%-3d", M);
  printf("   (ratio BLAS / ours, > 1: ours faster; median of 3 rounds)\n");
  for (auto [N, K] : {std::pair<int, int>{256, 256},
                      {768, 256},
                      {256, 688},
                      {1376, 256},
                      {768, 768},
                      {3072, 768},
                      {768, 3072},
                      {2304, 768},
                      {32000, 256},
                      {32000, 768}}) {
    auto W = torch::randn({N, K});
    printf("%5d x %-5d %8d", N, K, N * K);
    for (int M : {1, 2, 4, 8, 16, 32, 64}) {
      auto x = torch::randn({M, K});
      const int reps = std::max(5, (int)(2e8 / (double(N) * K * std::max(M, 4))));
      std::vector<double> r;
      for (int round = 0; round < 3; ++round)
        r.push_back(ms([&] { torch::linear(x, W); }, reps) /
                    ms([&] { small_rows_linear(x, W); }, reps));
      std::sort(r.begin(), r.end());
      printf("  %6.2f", r[1]);
    }
    printf("\n");
  }
}
