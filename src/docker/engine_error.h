// The one mapping from the Docker engine's HTTP errors to gpulab error codes and hints.
#pragma once

#include <string_view>

#include "core/result.h"

namespace gpulab::docker {

// Maps an HTTP error status plus engine message to a gpulab Error ("<what>: <engine message>").
Error error_from_response(int status, std::string_view body, std::string_view what);

}  // namespace gpulab::docker
