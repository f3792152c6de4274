// The engine error mapping of engine_error.h: status codes, and the engine messages that have a
// known remedy.
#include "docker/engine_error.h"

#include <string>

#include "core/json.h"
#include "core/strings.h"
#include "docker/http_transport.h"

namespace gpulab::docker {

namespace {
bool contains(std::string_view hay, std::string_view needle) {
  return to_lower(hay).find(needle) != std::string::npos;
}
}  // namespace

Error error_from_response(int status, std::string_view body, std::string_view what) {
  // The engine answers {"message": "..."}; older paths send plain text.
  std::string msg;
  Json j = Json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string())
    msg = j["message"].get<std::string>();
  else
    msg = trim(body);
  if (msg.empty()) msg = "HTTP " + std::to_string(status);
  std::string full = std::string(what) + ": " + msg;

  switch (status) {
    case 400:
      return Error(Code::kInvalidArgument, full);
    case 401:
    case 403:
      return Error(Code::kPermissionDenied, full);
    case 404:
      return Error(Code::kNotFound, full);
    case 409:
      if (contains(msg, "already in use") || contains(msg, "already exists"))
        return Error(Code::kAlreadyExists, full, "choose another name");
      return Error(Code::kConflict, full);
    default:
      break;
  }
  if (contains(msg, "port is already allocated") || contains(msg, "address already in use"))
    return Error(Code::kConflict, full, "choose another host port");
  // Docker answers 500 to a request on a container another request is removing; it is a state
  // conflict that clears in a moment, not an engine fault.
  if (contains(msg, "marked for removal") || contains(msg, "removal of container"))
    return Error(Code::kConflict, full, "the container is being removed; try again in a moment");
  if (contains(msg, "could not select device driver"))
    return Error(Code::kUnavailable, full,
                 "install the NVIDIA Container Toolkit and restart dockerd "
                 "(nvidia-ctk runtime configure --runtime=docker)");
  if (contains(msg, "no such file or directory") && contains(msg, "/dev/"))
    return Error(Code::kUnavailable, full, "the GPU device node is missing on this host");
  if (status == 503) return Error(Code::kUnavailable, full, kStartEngineHint);
  return Error(Code::kInternal, full);
}

}  // namespace gpulab::docker
