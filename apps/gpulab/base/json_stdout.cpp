// --json output: stdout carries the one document; see json_stdout.h.
#include "json_stdout.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace gpulab::cli {

JsonStdout::JsonStdout(bool enabled) {
  if (!enabled) return;
  std::cout.flush();
  std::fflush(stdout);
  saved_fd_ = ::dup(STDOUT_FILENO);
  if (saved_fd_ >= 0) ::dup2(STDERR_FILENO, STDOUT_FILENO);
}

JsonStdout::~JsonStdout() {
  if (saved_fd_ < 0) return;
  std::cout.flush();
  std::fflush(stdout);
  ::dup2(saved_fd_, STDOUT_FILENO);
  ::close(saved_fd_);
}

void JsonStdout::emit(const std::string& document) {
  const std::string line = document + "\n";
  if (saved_fd_ < 0) {
    std::cout << line << std::flush;
    return;
  }
  std::cout.flush();
  std::fflush(stdout);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(saved_fd_, line.data() + done, line.size() - done);
    if (n <= 0) return;  // stdout closed (a pipe whose reader left): nothing more to say
    done += static_cast<size_t>(n);
  }
}

}  // namespace gpulab::cli
