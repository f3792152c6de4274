// Tests the crash report with a real fault in a child process: a call through a null function
// pointer names its caller (the return address), which the unwinder alone cannot reach.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "core/crash_report.h"
#include "core/subprocess.h"

using namespace gpulab;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

volatile int after_call = 0;

// The load through a volatile pointer keeps the compiler from seeing the null; the store after
// the call keeps it a call (with a return address), not a tail jump.
__attribute__((noinline)) void call_through_null() {
  void (*volatile fn)() = nullptr;
  fn();
  after_call = after_call + 1;
}

// Runs call_through_null in a child with the report installed; returns its stderr and status.
std::string crash_child(int& status) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    install_crash_report();
    call_through_null();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  ::waitpid(pid, &status, 0);
  return out;
}

}  // namespace

TEST(CrashReport, CallThroughNullNamesTheCaller) {
  if (kSanitized) GTEST_SKIP() << "the sanitizer's own handler reports instead";
  int status = 0;
  const std::string report = crash_child(status);
  ASSERT_TRUE(WIFSIGNALED(status)) << report;
  EXPECT_EQ(WTERMSIG(status), SIGSEGV) << report;
  EXPECT_NE(report.find("gpulab: fatal signal SEGV\n"), std::string::npos) << report;
  EXPECT_NE(report.find("fault address 0x0, instruction at 0x0"), std::string::npos) << report;
  // The caller's frame, as backtrace_symbols_fd prints it: "  test_core(+0x...)[0x...]".
  std::smatch m;
  const std::regex caller(
      R"(the call came from \(the return address\):\n  [^\n]*\(\+(0x[0-9a-f]+)\))");
  ASSERT_TRUE(std::regex_search(report, m, caller)) << report;
  const unsigned long offset = std::stoul(m[1].str(), nullptr, 16);
  char at[32];
  std::snprintf(at, sizeof at, "0x%lx", offset - 1);  // the call instruction, before its return
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  auto r = run_process({"addr2line", "-f", "-C", "-e", self, at});
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->out.find("call_through_null"), std::string::npos) << r->out << "\n" << report;
}
