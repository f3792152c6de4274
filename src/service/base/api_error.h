// The service's error vocabulary: the error_code strings clients see (the seed's
// GPU_ALLOCATION_FAILED and PORT_CONFLICT plus ours), and the one mapping from gpulab::Code.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"
#include "core/json.h"

namespace gpulab::service {

// Every error_code the API can answer with. Names are the wire strings.
enum class ApiCode {
  kInvalidRequest,  // malformed JSON, unknown field, bad value
  kUnauthorized,    // missing or wrong token
  kForbidden,       // another user's object, admin-only operation
  kContainerNotFound,
  kSnapshotNotFound,
  kBackupNotFound,
  kNotFound,             // unknown path or other object
  kNameConflict,         // a container/snapshot/backup with that name exists
  kGpuAllocationFailed,  // not enough free GPUs
  kPortConflict,         // a requested host port is in use
  kPortExhausted,        // no free SSH port in the range
  kImageNotAllowed,      // image outside the allowlist or not on the engine
  kBackupCorrupt,        // checksum or format check failed
  kPayloadTooLarge,
  kMethodNotAllowed,
  kStateConflict,      // the container's state does not allow the operation
  kEngineUnavailable,  // Docker engine down or failing
  kTimeout,
  kUnsupported,
  kQuotaExceeded,        // the owner's quota (GPUs, containers, CPUs, memory, GPU-hours) is used up
  kTooManyRequests,      // too many failed token checks from one address (429, Retry-After)
  kInsufficientStorage,  // the service's own disk (the backup folder) is full (507)
  kInternalError,
};

std::string_view api_code_name(ApiCode code);
int api_code_http_status(ApiCode code);

// A request-ending error with an explicit API code (tier 3, for the HTTP layer).
class ApiError : public Exception {
 public:
  ApiError(ApiCode api, std::string message, std::string hint = {});
  ApiCode api_code() const { return api_; }

 private:
  ApiCode api_;
};

// What a failed request answers: the single place where any exception becomes a status + code.
struct ErrorReply {
  int http_status = 500;
  ApiCode api_code = ApiCode::kInternalError;
  std::string message;
  std::string hint;
};
ErrorReply error_reply(const Exception& e);
ApiCode api_code_for(Code code);

// The seed's envelope: {"success", "message", "data"} or {"success": false, "message",
// "error_code"}.
Json envelope_ok(std::string_view message, Json data);
Json envelope_error(const ErrorReply& reply);

}  // namespace gpulab::service
