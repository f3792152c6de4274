// Splitting CPU work of gpulab's own kernels between libtorch's intra-op threads. at::parallel_for
// cannot do it here: with libtorch's OpenMP backend its body is inline code that runs in parallel
// only in a file compiled with -fopenmp, and gpulab is not, so it quietly runs on one thread.
#pragma once

#include <ATen/Parallel.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

namespace gpulab::train {

// Runs f(t) for t in [0, chunks): the caller and chunks-1 tasks on libtorch's inter-op pool take
// chunks in turn until none is left. A task that starts late finds nothing left, so the caller
// never waits for a task that has not started (no deadlock when the pool is busy).
template <typename F>
void parallel_chunks(int64_t chunks, const F& f) {
  if (chunks <= 1) {
    if (chunks == 1) f(0);
    return;
  }
  struct State {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto state = std::make_shared<State>();
  const auto take = [chunks](State& s, const F& fn) {
    for (int64_t t; (t = s.next.fetch_add(1)) < chunks;) {
      fn(t);
      s.done.fetch_add(1, std::memory_order_release);
    }
  };
  for (int64_t i = 1; i < chunks; ++i) at::launch([state, &f, take] { take(*state, f); });
  take(*state, f);
  while (state->done.load(std::memory_order_acquire) < chunks) std::this_thread::yield();
}

}  // namespace gpulab::train
