// Ctrl-C / SIGTERM during training: the handler only records the signal; the training loop asks
// at each step boundary and stops there, so the run can leave a checkpoint to resume from.
#pragma once

namespace gpulab::train {

// While alive, SIGINT and SIGTERM set a flag instead of ending the process; the previous handlers
// come back on destruction.
class StopSignalGuard {
 public:
  StopSignalGuard();
  ~StopSignalGuard();
  StopSignalGuard(const StopSignalGuard&) = delete;
  StopSignalGuard& operator=(const StopSignalGuard&) = delete;
};

// The signal received since the guard was installed (SIGINT, SIGTERM), or 0.
int stop_signal_received();

}  // namespace gpulab::train
