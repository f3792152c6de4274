// Fault injection for the integration tests, in one place and out of the production build: a
// rank that hangs (GPULAB_TEST_STALL) and a checkpoint write that pauses so that a test can kill
// the process mid-write (GPULAB_TEST_CHECKPOINT_PAUSE). The environment is read only in builds
// configured with GPULAB_TEST_HOOKS (on with GPULAB_BUILD_TESTS); elsewhere these do nothing.
#pragma once

#include <cstdint>

namespace gpulab::train::test_hooks {

// GPULAB_TEST_STALL="R:S": rank R stalls for good (alive, sleeping, no more heartbeats) just
// before the forward pass of its S-th micro-step (1-based), as a deadlock would. 0: never.
int64_t stall_micro_step(int rank);
[[noreturn]] void stall(int rank, int64_t micro_step);

// GPULAB_TEST_CHECKPOINT_PAUSE="E:MS": sleeps MS milliseconds halfway through writing the
// checkpoint of epoch E.
void checkpoint_write_pause(int64_t epoch);

}  // namespace gpulab::train::test_hooks
