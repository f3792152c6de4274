// The error codes and typed exceptions of gpulab's three-tier error policy, and how a code maps
// to an exit code and an HTTP status (the one place that mapping lives).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace gpulab {

// Tier 1 is GPULAB_ASSERT (invariants). Tier 2 is Result<T> carrying an Error. Tier 3 is
// gpulab::Exception, thrown only for what ends a request or a run.
enum class Code {
  kOk = 0,
  kInvalidArgument,    // bad flag, bad field, malformed input: the caller must change the request
  kNotFound,           // no such container, file, model
  kAlreadyExists,      // name taken
  kConflict,           // port in use, state does not allow the operation
  kResourceExhausted,  // no free GPU or port
  kUnauthenticated,    // missing or wrong token
  kPermissionDenied,   // another user's container, forbidden field
  kUnavailable,        // engine not running, device absent
  kDataError,          // corrupt or truncated file
  kTimeout,            // operation ran past its deadline
  kUnsupported,        // feature or configuration not supported here
  kInternal,           // a bug or an unexpected failure of a dependency
};

std::string_view code_name(Code code);  // "INVALID_ARGUMENT", ...
int exit_code_for(Code code);           // process exit status for the CLI
int http_status_for(Code code);         // HTTP status for the service

// An expected failure: what failed, and optionally a hint saying what to do about it.
struct Error {
  Code code = Code::kInternal;
  std::string message;
  std::string hint;

  Error() = default;
  Error(Code c, std::string msg, std::string h = {})
      : code(c), message(std::move(msg)), hint(std::move(h)) {}
  // One line for a user: "message (hint)".
  std::string to_string() const;
};

// Ends a request or a run. Caught once, at the top of the CLI and of each HTTP handler.
class Exception : public std::runtime_error {
 public:
  explicit Exception(Error error) : std::runtime_error(error.message), error_(std::move(error)) {}
  Exception(Code code, std::string message, std::string hint = {})
      : Exception(Error{code, std::move(message), std::move(hint)}) {}
  const Error& error() const { return error_; }
  Code code() const { return error_.code; }
  const std::string& hint() const { return error_.hint; }

 private:
  Error error_;
};

[[noreturn]] void assert_fail(const char* expr, const char* file, int line, const char* msg);

}  // namespace gpulab

// Invariants only: a failure here is a bug in gpulab, never bad input.
#define GPULAB_ASSERT(cond, msg) \
  ((cond) ? (void)0 : ::gpulab::assert_fail(#cond, __FILE__, __LINE__, (msg)))
