// The process-wide switch of gpulab's CPU kernels (cpu_kernels.h).
#include "train/ops/cpu_kernels.h"

#include <atomic>

namespace gpulab::train {
namespace {
std::atomic<bool> g_cpu_kernels{true};
}  // namespace

void set_cpu_kernels(bool on) {
  g_cpu_kernels = on;
}

bool cpu_kernels_enabled() {
  return g_cpu_kernels;
}

}  // namespace gpulab::train
