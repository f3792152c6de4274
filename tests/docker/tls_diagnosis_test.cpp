// Which side refused a mutual-TLS connection (tls_diagnosis.h), on libcurl's codes and texts as
// curl 7.88 / OpenSSL 3.0 gave them against the lab dockerds (tests/integration/dockerd): a
// client certificate of another CA (the engine's alert), a server certificate not signed by our
// CA, a name the engine's certificate does not carry, an expired one, a key that does not match.
#include <curl/curl.h>
#include <gtest/gtest.h>

#include "docker/tls_diagnosis.h"

namespace gpulab::docker {
namespace {

const std::string kWhat = "Docker engine at tcp://10.213.2.2:2376";

std::string message_of(int code, const char* detail) {
  auto e = tls_failure(code, detail, kWhat, "10.213.2.2");
  return e ? e->message + " | " + e->hint : std::string("(not TLS)");
}

TEST(TlsDiagnosis, TheEngineRefusedOurClientCertificate) {
  auto m = message_of(CURLE_RECV_ERROR,
                      "OpenSSL SSL_read: OpenSSL/3.0.19: error:0A000412:SSL routines::sslv3 "
                      "alert bad certificate, errno 0");
  EXPECT_NE(m.find("the engine refused our client certificate"), std::string::npos) << m;
  EXPECT_NE(m.find("--tlscacert"), std::string::npos) << m;
  m = message_of(CURLE_RECV_ERROR, "error:0A000418:SSL routines::tlsv1 alert unknown ca");
  EXPECT_NE(m.find("refused our client certificate"), std::string::npos) << m;
}

TEST(TlsDiagnosis, WeRefusedTheEnginesCertificate) {
  auto m = message_of(CURLE_PEER_FAILED_VERIFICATION,
                      "SSL certificate problem: unable to get local issuer certificate");
  EXPECT_NE(m.find("we refused its certificate, which is not signed by our CA"), std::string::npos)
      << m;
  m = message_of(CURLE_PEER_FAILED_VERIFICATION,
                 "SSL certificate problem: certificate has expired");
  EXPECT_NE(m.find("its certificate has expired"), std::string::npos) << m;
}

TEST(TlsDiagnosis, TheEnginesCertificateDoesNotNameTheHost) {
  auto m = message_of(CURLE_PEER_FAILED_VERIFICATION,
                      "SSL: no alternative certificate subject name matches target host name "
                      "'wrongname'");
  EXPECT_NE(m.find("its certificate does not name 10.213.2.2"), std::string::npos) << m;
  EXPECT_NE(m.find("subjectAltName"), std::string::npos) << m;
}

TEST(TlsDiagnosis, OurOwnFilesAndWhatIsNotTls) {
  auto m = message_of(CURLE_SSL_CERTPROBLEM, "unable to set private key file: 'k.pem' type PEM");
  EXPECT_NE(m.find("our client certificate or key cannot be used"), std::string::npos) << m;
  EXPECT_EQ(message_of(CURLE_COULDNT_CONNECT, "Connection refused"), "(not TLS)");
  EXPECT_EQ(message_of(CURLE_RECV_ERROR, "Connection reset by peer"), "(not TLS)");
}

}  // namespace
}  // namespace gpulab::docker
