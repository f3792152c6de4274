// Links into the test build's gpulab-hooks binary only: installs train/test_hooks.h's hooks,
// driven by the environment, before main runs.
//   GPULAB_TEST_STALL="R:S": rank R stalls for good just before its S-th micro-step (1-based).
//   GPULAB_TEST_CHECKPOINT_PAUSE="E:MS": sleeps MS ms halfway through epoch E's checkpoint.
//   GPULAB_TEST_NUDGE_GRAD="R:S:X": rank R moves its largest gradient element by X of itself
//   before optimizer step S (1-based).
//   GPULAB_TEST_WEIGHT_HASH=1: GRPO's step records carry the synced weights' fingerprints.
//   GPULAB_TEST_LOSS_SCALING=1: fp16's dynamic loss scaling in any precision (X = inf above then
//   makes a rank's gradients overflow).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "train/test_hooks.h"

namespace {

int64_t stall_from_env(int rank) {
  const char* v = std::getenv("GPULAB_TEST_STALL");
  int r = -1;
  long long at = 0;
  if (v && std::sscanf(v, "%d:%lld", &r, &at) == 2 && r == rank) return at;
  return 0;
}

void pause_from_env(int64_t epoch) {
  const char* v = std::getenv("GPULAB_TEST_CHECKPOINT_PAUSE");
  long long e = 0, ms = 0;
  if (!v || std::sscanf(v, "%lld:%lld", &e, &ms) != 2 || e != epoch) return;
  std::fprintf(stderr, "checkpoint: test hook pausing mid-write\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

double nudge_from_env(int rank, int64_t step) {
  const char* v = std::getenv("GPULAB_TEST_NUDGE_GRAD");
  int r = -1;
  long long s = 0;
  double x = 0;
  if (v && std::sscanf(v, "%d:%lld:%lf", &r, &s, &x) == 3 && r == rank && s == step) return x;
  return 0.0;
}

bool weight_hash_from_env() {
  const char* v = std::getenv("GPULAB_TEST_WEIGHT_HASH");
  return v && *v == '1';
}

bool loss_scaling_from_env() {
  const char* v = std::getenv("GPULAB_TEST_LOSS_SCALING");
  return v && *v == '1';
}

[[maybe_unused]] const bool installed = [] {
  gpulab::train::test_hooks::install({stall_from_env, pause_from_env, nudge_from_env,
                                      weight_hash_from_env, loss_scaling_from_env});
  return true;
}();

}  // namespace
