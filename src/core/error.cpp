// Maps error codes to names, exit codes and HTTP statuses; the single place this mapping lives.
#include "core/error.h"

#include <cstdio>
#include <cstdlib>

namespace gpulab {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk:
      return "OK";
    case Code::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case Code::kNotFound:
      return "NOT_FOUND";
    case Code::kAlreadyExists:
      return "ALREADY_EXISTS";
    case Code::kConflict:
      return "CONFLICT";
    case Code::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case Code::kUnauthenticated:
      return "UNAUTHENTICATED";
    case Code::kPermissionDenied:
      return "PERMISSION_DENIED";
    case Code::kUnavailable:
      return "UNAVAILABLE";
    case Code::kDataError:
      return "DATA_ERROR";
    case Code::kTimeout:
      return "TIMEOUT";
    case Code::kUnsupported:
      return "UNSUPPORTED";
    case Code::kInternal:
      return "INTERNAL";
  }
  return "INTERNAL";
}

int exit_code_for(Code code) {
  switch (code) {
    case Code::kOk:
      return 0;
    // Exit 2: the user gave something we cannot use (flags, files, configuration).
    case Code::kInvalidArgument:
    case Code::kNotFound:
    case Code::kDataError:
    case Code::kAlreadyExists:
    case Code::kUnsupported:
      return 2;
    // Exit 3: the environment is not ready (engine down, no device, no permission).
    case Code::kUnavailable:
    case Code::kUnauthenticated:
    case Code::kPermissionDenied:
    case Code::kConflict:
    case Code::kResourceExhausted:
      return 3;
    case Code::kTimeout:
      return 4;
    case Code::kInternal:
      return 1;
  }
  return 1;
}

int http_status_for(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
    case Code::kDataError:
      return 400;
    case Code::kUnauthenticated:
      return 401;
    case Code::kPermissionDenied:
      return 403;
    case Code::kNotFound:
      return 404;
    case Code::kAlreadyExists:
    case Code::kConflict:
      return 409;
    case Code::kResourceExhausted:
      return 409;
    case Code::kUnsupported:
      return 501;
    case Code::kUnavailable:
      return 503;
    case Code::kTimeout:
      return 504;
    case Code::kInternal:
      return 500;
  }
  return 500;
}

std::string Error::to_string() const {
  if (hint.empty()) return message;
  return message + " (hint: " + hint + ")";
}

void assert_fail(const char* expr, const char* file, int line, const char* msg) {
  std::fprintf(stderr, "gpulab internal error: %s [%s] at %s:%d\n", msg, expr, file, line);
  std::abort();
}

}  // namespace gpulab
