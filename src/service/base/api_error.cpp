// Maps errors to the API's error_code strings and HTTP statuses; no other file does this.
#include "service/base/api_error.h"

namespace gpulab::service {

namespace {

struct CodeRow {
  ApiCode api;
  std::string_view name;
  Code core;  // the gpulab::Code it belongs to (gives the HTTP status)
};

constexpr CodeRow kCodes[] = {
    {ApiCode::kInvalidRequest, "INVALID_REQUEST", Code::kInvalidArgument},
    {ApiCode::kUnauthorized, "UNAUTHORIZED", Code::kUnauthenticated},
    {ApiCode::kForbidden, "FORBIDDEN", Code::kPermissionDenied},
    {ApiCode::kContainerNotFound, "CONTAINER_NOT_FOUND", Code::kNotFound},
    {ApiCode::kSnapshotNotFound, "SNAPSHOT_NOT_FOUND", Code::kNotFound},
    {ApiCode::kBackupNotFound, "BACKUP_NOT_FOUND", Code::kNotFound},
    {ApiCode::kNotFound, "NOT_FOUND", Code::kNotFound},
    {ApiCode::kNameConflict, "NAME_CONFLICT", Code::kAlreadyExists},
    {ApiCode::kGpuAllocationFailed, "GPU_ALLOCATION_FAILED", Code::kResourceExhausted},
    {ApiCode::kPortConflict, "PORT_CONFLICT", Code::kConflict},
    {ApiCode::kPortExhausted, "PORT_EXHAUSTED", Code::kResourceExhausted},
    {ApiCode::kImageNotAllowed, "IMAGE_NOT_ALLOWED", Code::kPermissionDenied},
    {ApiCode::kBackupCorrupt, "BACKUP_CORRUPT", Code::kDataError},
    {ApiCode::kPayloadTooLarge, "PAYLOAD_TOO_LARGE", Code::kInvalidArgument},
    {ApiCode::kMethodNotAllowed, "METHOD_NOT_ALLOWED", Code::kInvalidArgument},
    {ApiCode::kStateConflict, "STATE_CONFLICT", Code::kConflict},
    {ApiCode::kEngineUnavailable, "ENGINE_UNAVAILABLE", Code::kUnavailable},
    {ApiCode::kTimeout, "TIMEOUT", Code::kTimeout},
    {ApiCode::kUnsupported, "UNSUPPORTED", Code::kUnsupported},
    {ApiCode::kQuotaExceeded, "QUOTA_EXCEEDED", Code::kResourceExhausted},
    {ApiCode::kTooManyRequests, "TOO_MANY_REQUESTS", Code::kUnauthenticated},
    {ApiCode::kInsufficientStorage, "INSUFFICIENT_STORAGE", Code::kResourceExhausted},
    {ApiCode::kInternalError, "INTERNAL_ERROR", Code::kInternal},
};

const CodeRow& row(ApiCode code) {
  for (const auto& r : kCodes)
    if (r.api == code) return r;
  return kCodes[std::size(kCodes) - 1];
}

}  // namespace

std::string_view api_code_name(ApiCode code) {
  return row(code).name;
}

int api_code_http_status(ApiCode code) {
  // Statuses HTTP has a more precise word for than the core table.
  if (code == ApiCode::kPayloadTooLarge) return 413;
  if (code == ApiCode::kMethodNotAllowed) return 405;
  if (code == ApiCode::kTooManyRequests) return 429;
  if (code == ApiCode::kInsufficientStorage) return 507;
  return http_status_for(row(code).core);
}

ApiError::ApiError(ApiCode api, std::string message, std::string hint)
    : Exception(row(api).core, std::move(message), std::move(hint)), api_(api) {}

ApiCode api_code_for(Code code) {
  switch (code) {
    case Code::kInvalidArgument:
      return ApiCode::kInvalidRequest;
    case Code::kNotFound:
      return ApiCode::kNotFound;
    case Code::kAlreadyExists:
      return ApiCode::kNameConflict;
    case Code::kConflict:
      return ApiCode::kStateConflict;
    case Code::kResourceExhausted:
      return ApiCode::kGpuAllocationFailed;
    case Code::kUnauthenticated:
      return ApiCode::kUnauthorized;
    case Code::kPermissionDenied:
      return ApiCode::kForbidden;
    case Code::kUnavailable:
      return ApiCode::kEngineUnavailable;
    case Code::kDataError:
      return ApiCode::kBackupCorrupt;
    case Code::kTimeout:
      return ApiCode::kTimeout;
    case Code::kUnsupported:
      return ApiCode::kUnsupported;
    case Code::kOk:
    case Code::kInternal:
      return ApiCode::kInternalError;
  }
  return ApiCode::kInternalError;
}

ErrorReply error_reply(const Exception& e) {
  ErrorReply r;
  if (const auto* api = dynamic_cast<const ApiError*>(&e)) {
    r.api_code = api->api_code();
  } else {
    r.api_code = api_code_for(e.code());
  }
  r.http_status = api_code_http_status(r.api_code);
  r.message = e.error().message;
  r.hint = e.hint();
  return r;
}

Json envelope_ok(std::string_view message, Json data) {
  Json j = Json::object();
  j["success"] = true;
  j["message"] = message;
  j["data"] = std::move(data);
  return j;
}

Json envelope_error(const ErrorReply& reply) {
  Json j = Json::object();
  j["success"] = false;
  j["message"] = reply.message;
  j["error_code"] = api_code_name(reply.api_code);
  if (!reply.hint.empty()) j["hint"] = reply.hint;
  return j;
}

}  // namespace gpulab::service
