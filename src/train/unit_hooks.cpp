// The process-wide unit hooks pointer.
#include "train/unit_hooks.h"

#include <atomic>

namespace gpulab::train {

namespace {
std::atomic<UnitHooks*> g_hooks{nullptr};
}

void set_unit_hooks(UnitHooks* hooks) {
  g_hooks.store(hooks);
}

UnitHooks* unit_hooks() {
  return g_hooks.load();
}

}  // namespace gpulab::train
