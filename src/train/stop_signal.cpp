// Ctrl-C / SIGTERM as a request to stop at the next step boundary; see stop_signal.h.
#include "train/stop_signal.h"

#include <atomic>
#include <csignal>

namespace gpulab::train {
namespace {

std::atomic<int> g_signal{0};
struct sigaction g_old_int {
}, g_old_term{};

// Only records: under `gpulab launch` a rank gets the user's SIGINT and the launcher's SIGTERM
// right after it, and both mean "stop at the next step" (the launcher's --stop_grace later ends a
// rank that cannot get there, e.g. one stuck in a collective).
void on_signal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);  // the first one names the stop
}

}  // namespace

StopSignalGuard::StopSignalGuard() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

StopSignalGuard::~StopSignalGuard() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
}

int stop_signal_received() {
  return g_signal.load();
}

int agreed_stop_signal(int local, int interrupted_ranks, int otherwise_stopped_ranks) {
  if (otherwise_stopped_ranks > 0) return local != 0 && local != SIGINT ? local : SIGTERM;
  return interrupted_ranks > 0 ? SIGINT : 0;
}

}  // namespace gpulab::train
