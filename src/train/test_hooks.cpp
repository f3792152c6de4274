// The fault-injection points of test_hooks.h: empty unless a test binary installs hooks.
#include "train/test_hooks.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

namespace gpulab::train::test_hooks {

namespace {
// A function-local static: a test binary's static initializer may install before main.
Hooks& installed() {
  static Hooks hooks;
  return hooks;
}
}  // namespace

void install(Hooks hooks) {
  installed() = std::move(hooks);
}

int64_t stall_micro_step(int rank) {
  const auto& f = installed().stall_micro_step;
  return f ? f(rank) : 0;
}

void stall(int rank, int64_t micro_step) {
  std::fprintf(stderr, "test hook: rank %d stalls before micro-step %lld\n", rank,
               static_cast<long long>(micro_step));
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

void checkpoint_write_pause(int64_t epoch) {
  if (const auto& f = installed().checkpoint_write_pause) f(epoch);
}

void nudge_gradient(int rank, int64_t step, torch::optim::Optimizer& opt) {
  const auto& f = installed().gradient_nudge;
  const double rel = f ? f(rank, step) : 0.0;
  if (rel == 0.0) return;
  for (auto& group : opt.param_groups())
    for (auto& p : group.params()) {
      auto& g = p.mutable_grad();
      if (!g.defined() || g.numel() == 0) continue;
      // In place whatever the gradient's memory layout: every element at the largest magnitude.
      const auto largest = g.abs().max();
      g.add_(torch::where(g.abs() == largest, g * rel, torch::zeros_like(g)));
      std::fprintf(stderr, "test hook: rank %d step %lld gradient nudged by %g relative\n", rank,
                   static_cast<long long>(step), rel);
      return;
    }
}

bool loss_scaling() {
  const auto& f = installed().loss_scaling;
  return f && f();
}

bool hash_synced_weights() {
  const auto& f = installed().hash_synced_weights;
  return f && f();
}

}  // namespace gpulab::train::test_hooks
