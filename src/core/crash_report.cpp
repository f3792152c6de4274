// The fatal-signal stack report of crash_report.h.
#include "core/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

// Under a sanitizer its own handlers report with more detail (shadow memory, both stacks).
#if defined(__SANITIZE_ADDRESS__)
#define GPULAB_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPULAB_SANITIZED 1
#endif
#endif

namespace gpulab {

#if defined(GPULAB_SANITIZED)

void install_crash_report() {}

#else

namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

void put(const char* s) {
  (void)!::write(STDERR_FILENO, s, ::strlen(s));
}

// Only async-signal-safe calls after a heap may be corrupt: write, backtrace (its library was
// loaded at install time) and backtrace_symbols_fd (no malloc). Then the default action, so the
// exit status still names the signal.
void on_fatal(int sig) {
  put("\ngpulab: fatal signal ");
  const char* name = ::sigabbrev_np(sig);
  put(name != nullptr ? name : "?");
  put("; stack (frames in gpulab: scripts/symbolize.sh turns +0x offsets into lines):\n");
  void* frames[64];
  const int n = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, n, STDERR_FILENO);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

void install_crash_report() {
  void* warm[1];
  (void)::backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  static char alt_stack[64 * 1024];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_handler = on_fatal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
  for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

#endif

}  // namespace gpulab
