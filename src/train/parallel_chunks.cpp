// Chunks of gpulab's CPU kernels on libtorch's OpenMP threads, else its inter-op pool
// (parallel_chunks.h).
#include "train/parallel_chunks.h"

#include <algorithm>

#if defined(_OPENMP)
#include <omp.h>
#else
#include <ATen/Parallel.h>

#include <atomic>
#include <memory>
#include <thread>
#endif

namespace gpulab::train {

#if defined(_OPENMP)
void run_chunks(int64_t chunks, ChunkCall call, const void* context) {
  const int threads =
      omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(chunks, omp_get_max_threads()));
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t t = 0; t < chunks; ++t) call(context, t);
}
#else
// The caller and chunks-1 tasks on libtorch's inter-op pool take chunks in turn until none is
// left. A task that starts late finds nothing left, so the caller never waits for a task that has
// not started (no deadlock when the pool is busy).
void run_chunks(int64_t chunks, ChunkCall call, const void* context) {
  struct State {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto state = std::make_shared<State>();
  const auto take = [chunks, call, context](State& s) {
    for (int64_t t; (t = s.next.fetch_add(1)) < chunks;) {
      call(context, t);
      s.done.fetch_add(1, std::memory_order_release);
    }
  };
  for (int64_t i = 1; i < chunks; ++i) at::launch([state, take] { take(*state); });
  take(*state);
  while (state->done.load(std::memory_order_acquire) < chunks) std::this_thread::yield();
}
#endif

}  // namespace gpulab::train
