// Fault-injection points for the integration tests, in one place and out of the shipped binary:
// a rank that hangs, a checkpoint write that pauses so that a test can kill the process
// mid-write, a gradient nudged by a tiny amount (the bug an equivalence test must see) or made
// inf, and fp16's loss scaling turned on where the CPU cannot run fp16. gpulab
// itself installs no hooks, so these do nothing there and its binary holds no test variable names;
// the test build's gpulab-hooks binary links tests/support/env_test_hooks.cpp, which installs hooks
// driven by the environment.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>

namespace gpulab::train::test_hooks {

struct Hooks {
  // The 1-based micro-step before whose forward pass this rank stalls for good; 0: never.
  std::function<int64_t(int rank)> stall_micro_step;
  // Called halfway through writing the checkpoint of an epoch.
  std::function<void(int64_t epoch)> checkpoint_write_pause;
  // The relative amount (0: none) by which this rank's largest gradient element is moved before
  // the 1-based optimizer step `step`.
  std::function<double(int rank, int64_t step)> gradient_nudge;
  // GRPO with generation ranks: after each weight sync, both sides' weight fingerprints go into
  // the step record (hashing every weight each step costs a pass over the model).
  std::function<bool()> hash_synced_weights;
  // fp16's dynamic loss scaling in any precision (fp16 trains on a GPU only), so that the CPU
  // tests drive the scaler's overflow agreement across ranks.
  std::function<bool()> loss_scaling;
};

// Replaces the installed hooks (a static initializer of a test binary calls it once).
void install(Hooks hooks);

int64_t stall_micro_step(int rank);
// Sleeps for good (alive, no more heartbeats), as a deadlocked rank would.
[[noreturn]] void stall(int rank, int64_t micro_step);
void checkpoint_write_pause(int64_t epoch);
// Applies gradient_nudge to the gradients the optimizer steps (after the ranks' reduction, before
// clipping): the model's, or this rank's shards under ZeRO.
void nudge_gradient(int rank, int64_t step, torch::optim::Optimizer& opt);
bool hash_synced_weights();
bool loss_scaling();

}  // namespace gpulab::train::test_hooks
