// Which side of a mutual-TLS connection to an engine refused it, from libcurl's result code and
// its error text: the engine refused our client certificate (a TLS alert from the peer), we
// refused the engine's certificate (not signed by our CA, or expired), the engine's certificate
// does not name the host we dialled, or our own certificate and key cannot be used. Each with the
// hint for that case.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpulab::docker {

// `curl_code`: a CURLcode; `detail`: libcurl's error buffer; `what`: "Docker engine at
// tcp://h:2376"; `host`: the host dialled. nullopt when the failure is not a TLS one.
std::optional<Error> tls_failure(int curl_code, std::string_view detail, const std::string& what,
                                 const std::string& host);

}  // namespace gpulab::docker
