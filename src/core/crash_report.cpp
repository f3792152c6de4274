// The fatal-signal stack report of crash_report.h.
#include "core/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>

#include "core/mapped_file.h"
#include "core/signal_name.h"

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

void put_hex(std::uintptr_t v) {
  char buf[2 + 2 * sizeof v + 1];
  char* p = buf + sizeof buf - 1;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[v & 0xf];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  put(p);
}

void put_dec(size_t v) {
  char buf[24];
  char* p = buf + sizeof buf - 1;
  *p = '\0';
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  put(p);
}

// A read past the end of a mapped file that shrank under gpulab (another program truncated or
// rewrote it in place): the file is the fault, not gpulab, so an error that names it, exit 2.
void exit_if_mapped_file_shrank(int sig, const siginfo_t* info) {
  MappedAt at;
  if (sig != SIGBUS || info == nullptr || info->si_code != BUS_ADRERR ||
      !mapped_file_at(info->si_addr, at))
    return;
  put("error: ");
  put(at.path);
  put(" shrank while gpulab read it (byte ");
  put_dec(at.offset);
  put(" of the ");
  put_dec(at.size);
  put(" it had when opened)\nhint: a file gpulab reads must not be truncated or rewritten in "
      "place meanwhile: write the new one beside it and rename it over the old\n");
  ::_exit(2);
}

// One frame as backtrace_symbols_fd prints it ("gpulab(+0x...)[0x...]"), so symbolize.sh reads it.
void put_frame(const char* label, std::uintptr_t address) {
  put(label);
  void* frame[1] = {reinterpret_cast<void*>(address)};
  ::backtrace_symbols_fd(frame, 1, STDERR_FILENO);
}

// A jump or call to a bad address (a null function pointer, a symbol bound to the wrong library)
// faults on the instruction fetch itself: the unwinder then cannot walk past that address, so the
// report names the caller from the return address the call left (on the stack on x86-64, in the
// link register on AArch64).
void report_fault_site(int sig, const siginfo_t* info, const void* context) {
  if (info == nullptr || context == nullptr || info->si_code <= 0) return;  // sent by kill()
  const auto* uc = static_cast<const ucontext_t*>(context);
  std::uintptr_t pc = 0, caller = 0;
#if defined(__x86_64__)
  pc = static_cast<std::uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  caller = *reinterpret_cast<const std::uintptr_t*>(uc->uc_mcontext.gregs[REG_RSP]);
#elif defined(__aarch64__)
  pc = static_cast<std::uintptr_t>(uc->uc_mcontext.pc);
  caller = static_cast<std::uintptr_t>(uc->uc_mcontext.regs[30]);
#else
  (void)uc;
  return;
#endif
  const bool bad_jump =
      (sig == SIGSEGV || sig == SIGBUS) && reinterpret_cast<std::uintptr_t>(info->si_addr) == pc;
  put("gpulab: fault address ");
  put_hex(reinterpret_cast<std::uintptr_t>(info->si_addr));
  put(", instruction at ");
  put_hex(pc);
  put("\n");
  if (bad_jump) {
    put("gpulab: a call or jump to a bad address; the call came from (the return address):\n");
    put_frame("  ", caller);
  } else {
    put_frame("gpulab: faulting instruction: ", pc);
  }
}

// Only async-signal-safe calls after a heap may be corrupt: write, backtrace (its library was
// loaded at install time) and backtrace_symbols_fd (no malloc). Then the default action, so the
// exit status still names the signal.
void on_fatal(int sig, siginfo_t* info, void* context) {
  exit_if_mapped_file_shrank(sig, info);
  put("\ngpulab: fatal signal ");
  const char* name = signal_abbrev(sig);
  put(name != nullptr ? name : "?");
  put("\n");
  report_fault_site(sig, info, context);
  put("gpulab: stack (frames in gpulab: scripts/symbolize.sh turns +0x offsets into lines):\n");
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
  sa.sa_sigaction = on_fatal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_ONSTACK | SA_RESETHAND | SA_SIGINFO;
  for (int sig : kSignals) ::sigaction(sig, &sa, nullptr);
}

#endif

}  // namespace gpulab
