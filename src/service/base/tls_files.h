// A lab host's mutual-TLS files checked when the config is read, so a wrong file is named at
// start rather than found at the first engine call: tls_ca holds certificates valid now, tls_cert
// is a certificate valid now, tls_key is its key, and, when the admin names the CA the engine
// trusts for clients (tls_client_ca, dockerd's --tlscacert), tls_cert is signed by it.
#pragma once

#include <string>

#include "core/result.h"

namespace gpulab::service {

// A host's TLS file paths, as its config entry names them (config.h's HostConfig fields).
struct HostTlsFiles {
  std::string ca, cert, key, client_ca;  // client_ca may be empty
};

// `at`: the host's place in the config ("hosts[1]"), for the messages. kInvalidArgument naming
// the field and the file.
Status check_host_tls_files(const HostTlsFiles& f, const std::string& at);

}  // namespace gpulab::service
