// --json output: exactly one JSON document on stdout, every human line on stderr.
#pragma once

#include <string>

namespace gpulab::cli {

// While alive with `enabled`, file descriptor 1 points at stderr, so whatever prints human text
// (our own lines, the libraries', libtorch's warnings) cannot mix into the document; emit() writes
// the document to the real stdout. Create it after launch_if_needed: ranks inherit the real stdout.
class JsonStdout {
 public:
  explicit JsonStdout(bool enabled);
  ~JsonStdout();
  JsonStdout(const JsonStdout&) = delete;
  JsonStdout& operator=(const JsonStdout&) = delete;

  // Writes `document` and a newline to the real stdout (stdout itself when not enabled).
  void emit(const std::string& document);

 private:
  int saved_fd_ = -1;
};

}  // namespace gpulab::cli
