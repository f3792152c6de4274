// The diagnosis of tls_diagnosis.h. libcurl's codes: 35 SSL_CONNECT_ERROR, 55 SEND_ERROR,
// 56 RECV_ERROR (a peer's TLS alert under TLS 1.3 arrives after the handshake, on the first
// read), 58 SSL_CERTPROBLEM, 60 PEER_FAILED_VERIFICATION, 77 SSL_CACERT_BADFILE.
#include "docker/tls_diagnosis.h"

#include <curl/curl.h>

#include "core/strings.h"

namespace gpulab::docker {

namespace {

bool has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

// The alerts an engine sends when it will not take our client certificate.
bool client_certificate_alert(std::string_view d) {
  if (!has(d, "alert")) return false;
  for (const char* a :
       {"bad certificate", "unknown ca", "certificate required", "certificate expired",
        "certificate revoked", "unsupported certificate", "certificate unknown", "access denied"})
    if (has(d, a)) return true;
  return false;
}

constexpr const char* kFiles =
    " (DOCKER_CERT_PATH's ca.pem, cert.pem, key.pem, or a gpulab serve host's tls_ca, tls_cert, "
    "tls_key)";

}  // namespace

std::optional<Error> tls_failure(int curl_code, std::string_view detail, const std::string& what,
                                 const std::string& host) {
  const std::string d = to_lower(detail);
  const std::string said = detail.empty() ? std::string() : " (" + std::string(detail) + ")";
  switch (curl_code) {
    case CURLE_PEER_FAILED_VERIFICATION:
      if (has(d, "subject name") || has(d, "does not match") || has(d, "hostname mismatch"))
        return Error(Code::kUnavailable,
                     "TLS to the " + what + " failed: its certificate does not name " + host + said,
                     "the engine's certificate must carry " + host +
                         " in its subjectAltName (IP:... or DNS:...): make it again with that "
                         "name, or reach the engine by a name its certificate carries");
      if (has(d, "expired"))
        return Error(Code::kUnavailable,
                     "TLS to the " + what + " failed: its certificate has expired" + said,
                     "renew the engine's certificate (dockerd --tlscert)");
      return Error(Code::kUnavailable,
                   "TLS to the " + what +
                       " failed: we refused its certificate, which is not signed by our CA" + said,
                   std::string("the CA file must be the one that signed the engine's certificate "
                               "(dockerd --tlscert)") +
                       kFiles);
    case CURLE_SSL_CERTPROBLEM:
      return Error(
          Code::kUnavailable,
          "TLS to the " + what + " failed: our client certificate or key cannot be used" + said,
          std::string("the certificate and key must be a matching PEM certificate and "
                      "unencrypted key") +
              kFiles);
    case CURLE_SSL_CACERT_BADFILE:
      return Error(Code::kUnavailable,
                   "TLS to the " + what + " failed: the CA file cannot be read" + said,
                   std::string("give a PEM file of CA certificates") + kFiles);
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      if (client_certificate_alert(d))
        return Error(
            Code::kUnavailable,
            "TLS to the " + what + " failed: the engine refused our client certificate" + said,
            std::string("the engine takes only client certificates signed by the CA it "
                        "trusts (dockerd --tlscacert) and not expired: make the client "
                        "certificate with that CA") +
                kFiles);
      if (curl_code != CURLE_SSL_CONNECT_ERROR) return std::nullopt;
      return Error(Code::kUnavailable, "TLS to the " + what + " failed" + said,
                   "check that the engine speaks TLS on that port (dockerd --tlsverify) and the "
                   "files" +
                       std::string(kFiles));
    default:
      return std::nullopt;
  }
}

}  // namespace gpulab::docker
