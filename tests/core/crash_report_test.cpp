// Tests the crash report with a real fault in a child process: a call through a null function
// pointer names its caller (the return address), which the unwinder alone cannot reach; a mapped
// file truncated from outside is an error naming it, not a crash.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <string>

#include "core/crash_report.h"
#include "core/mapped_file.h"
#include "core/subprocess.h"
#include "support/temp_dir.h"

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

// Runs FAULT in a child with the report installed; returns its stderr and status.
std::string crash_child(int& status, const std::function<void()>& fault = call_through_null) {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    install_crash_report();
    fault();
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

namespace {

// In a child with the report installed: a 65,536-byte file at PATH, mapped (through MappedFile,
// or a mapping of the test's own), read while whole, truncated to 4,096 bytes as another program
// would, then read at byte 40,000. Its stderr and status.
std::string read_past_truncation(const std::string& path, bool through_mapped_file, int& status) {
  std::ofstream(path) << std::string(65536, 'w');
  return crash_child(status, [&] {
    std::shared_ptr<MappedFile> mapped;
    const char* bytes = nullptr;
    if (through_mapped_file) {
      auto m = MappedFile::open(path);
      if (!m.ok()) ::_exit(10);
      mapped = *m;
      bytes = mapped->bytes().data();
    } else {
      const int fd = ::open(path.c_str(), O_RDONLY);
      void* p = ::mmap(nullptr, 65536, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) ::_exit(10);
      bytes = static_cast<const char*>(p);
    }
    if (bytes[40000] != 'w') ::_exit(11);
    if (::truncate(path.c_str(), 4096) != 0) ::_exit(12);
    volatile char past_end = bytes[40000];
    (void)past_end;
    ::_exit(13);  // not reached: the read past the new end is SIGBUS
  });
}

}  // namespace

TEST(CrashReport, AMappedFileTruncatedFromOutsideIsAnErrorNamingIt) {
  if (kSanitized) GTEST_SKIP() << "the sanitizer's own handler reports instead";
  gpulab::testing::TempDir dir("mapped");
  const std::string path = (dir.path / "weights.safetensors").string();
  int status = 0;
  const std::string report = read_past_truncation(path, true, status);
  ASSERT_TRUE(WIFEXITED(status)) << report;
  EXPECT_EQ(WEXITSTATUS(status), 2) << report;
  EXPECT_NE(report.find("error: " + path +
                        " shrank while gpulab read it (byte 40000 of the 65536 "
                        "it had when opened)\nhint: "),
            std::string::npos)
      << report;
  EXPECT_EQ(report.find("fatal signal"), std::string::npos) << report;
}

// The same fault through a mapping no MappedFile holds is a crash, reported as one.
TEST(CrashReport, ASigbusOutsideAnyMappedFileIsStillACrash) {
  if (kSanitized) GTEST_SKIP() << "the sanitizer's own handler reports instead";
  gpulab::testing::TempDir dir("mapped");
  int status = 0;
  const std::string report = read_past_truncation((dir.path / "other").string(), false, status);
  ASSERT_TRUE(WIFSIGNALED(status)) << report;
  EXPECT_EQ(WTERMSIG(status), SIGBUS) << report;
  EXPECT_NE(report.find("gpulab: fatal signal BUS\n"), std::string::npos) << report;
}
