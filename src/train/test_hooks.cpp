// Fault injection for the integration tests; see test_hooks.h. Compiled with GPULAB_TEST_HOOKS=1
// only in test builds (src/train/CMakeLists.txt).
#include "train/test_hooks.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace gpulab::train::test_hooks {

#if GPULAB_TEST_HOOKS

int64_t stall_micro_step(int rank) {
  const char* v = std::getenv("GPULAB_TEST_STALL");
  int r = -1;
  long long at = 0;
  if (v && std::sscanf(v, "%d:%lld", &r, &at) == 2 && r == rank) return at;
  return 0;
}

void checkpoint_write_pause(int64_t epoch) {
  const char* v = std::getenv("GPULAB_TEST_CHECKPOINT_PAUSE");
  long long e = 0, ms = 0;
  if (!v || std::sscanf(v, "%lld:%lld", &e, &ms) != 2 || e != epoch) return;
  std::fprintf(stderr, "checkpoint: test hook pausing mid-write\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

#else

int64_t stall_micro_step(int /*rank*/) {
  return 0;
}

void checkpoint_write_pause(int64_t /*epoch*/) {}

#endif

void stall(int rank, int64_t micro_step) {
  std::fprintf(stderr, "GPULAB_TEST_STALL: rank %d stalls before micro-step %lld (test hook)\n",
               rank, static_cast<long long>(micro_step));
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace gpulab::train::test_hooks
