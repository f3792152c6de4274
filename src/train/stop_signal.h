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

// The stop signal every rank reports, from this rank's own (`local`, 0 if none yet) and the
// number of ranks that saw SIGINT and that saw another signal. The launcher signals all ranks at
// once, but one may look a step before another has it: that rank still names the others' signal.
int agreed_stop_signal(int local, int interrupted_ranks, int otherwise_stopped_ranks);

}  // namespace gpulab::train
