// A host's mutual-TLS files are checked when the config is read (tls_files.h), on certificates
// openssl makes here: the good set passes; a key of another certificate, an expired client
// certificate, a CA file that holds no certificate, and a client certificate that the CA the
// engine trusts (tls_client_ca) did not sign are each refused naming the field and the file,
// with a hint that points to docs/engines.md.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/files.h"
#include "core/subprocess.h"
#include "service/base/config.h"
#include "service/base/crypto.h"

namespace gpulab::service {
namespace {

namespace fs = std::filesystem;

// ca.pem (+ ca-key.pem), other-ca.pem; cert.pem/key.pem signed by ca; other-key.pem (a key of no
// certificate here); expired.pem (ca-signed, expired yesterday) with key.pem.
constexpr const char* kMakeCerts = R"(set -e
cd "$1"
q() { "$@" >/dev/null 2>&1; }
q openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 2 -subj /CN=test-ca
q openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca-key.pem -out other-ca.pem -days 2 -subj /CN=other-ca
q openssl req -newkey rsa:2048 -nodes -keyout key.pem -out client.csr -subj /CN=client
q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -days 2
q openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out expired.pem -days -1
q openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out other-key.pem
echo not a certificate > junk.pem
)";

class HostTlsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!which("openssl")) GTEST_SKIP() << "no openssl CLI to make test certificates";
    dir_ = fs::temp_directory_path() / ("gpulab-tls-files-" + random_secret(8));
    fs::create_directories(dir_);
    auto made = run_process({"/bin/bash", "-c", kMakeCerts, "make-certs", dir_.string()});
    ASSERT_TRUE(made.ok() && made->success()) << (made.ok() ? made->err : made.error().message);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string f(const std::string& name) const { return (dir_ / name).string(); }
  // validate_config of a lab with one tcp host using these files ("" when it passes).
  Status check(const std::string& ca, const std::string& cert, const std::string& key,
               const std::string& client_ca = {}) {
    ServiceConfig c;
    HostConfig h;
    h.name = "lab2";
    h.url = "tcp://10.0.0.2:2376";
    h.tls_ca = ca;
    h.tls_cert = cert;
    h.tls_key = key;
    h.tls_client_ca = client_ca;
    c.hosts.push_back(h);
    return validate_config(c);
  }
  static bool has(const Status& st, const std::string& part) {
    return !st.ok() && st.error().message.find(part) != std::string::npos;
  }
  fs::path dir_;
};

TEST_F(HostTlsFiles, AGoodSetPasses) {
  auto st = check(f("ca.pem"), f("cert.pem"), f("key.pem"));
  EXPECT_TRUE(st.ok()) << st.error().to_string();
  st = check(f("ca.pem"), f("cert.pem"), f("key.pem"), f("ca.pem"));
  EXPECT_TRUE(st.ok()) << st.error().to_string();
}

TEST_F(HostTlsFiles, AKeyOfAnotherCertificateIsRefused) {
  auto st = check(f("ca.pem"), f("cert.pem"), f("other-key.pem"));
  EXPECT_TRUE(has(st, "hosts[0].tls_key: " + f("other-key.pem") + " is not the key of tls_cert"))
      << st.error().to_string();
  EXPECT_NE(st.error().hint.find("docs/engines.md"), std::string::npos) << st.error().hint;
}

TEST_F(HostTlsFiles, AnExpiredClientCertificateIsRefused) {
  auto st = check(f("ca.pem"), f("expired.pem"), f("key.pem"));
  EXPECT_TRUE(has(st, "hosts[0].tls_cert: " + f("expired.pem") + " expired on "))
      << st.error().to_string();
}

TEST_F(HostTlsFiles, ACaFileWithoutACertificateAndACertificateThatIsNotOneAreRefused) {
  auto st = check(f("junk.pem"), f("cert.pem"), f("key.pem"));
  EXPECT_TRUE(has(st, "hosts[0].tls_ca: " + f("junk.pem") + " holds no PEM certificate"))
      << st.error().to_string();
  st = check(f("ca.pem"), f("junk.pem"), f("key.pem"));
  EXPECT_TRUE(has(st, "hosts[0].tls_cert: " + f("junk.pem") + " is not a PEM certificate"))
      << st.error().to_string();
  st = check(f("ca.pem"), f("cert.pem"), f("junk.pem"));
  EXPECT_TRUE(has(st, "hosts[0].tls_key: " + f("junk.pem") + " is not a PEM private key"))
      << st.error().to_string();
}

TEST_F(HostTlsFiles, AClientCertificateTheEnginesCaDidNotSignIsRefused) {
  auto st = check(f("ca.pem"), f("cert.pem"), f("key.pem"), f("other-ca.pem"));
  EXPECT_TRUE(has(st, "hosts[0].tls_cert: " + f("cert.pem") + " is not signed by tls_client_ca " +
                          f("other-ca.pem")))
      << st.error().to_string();
  EXPECT_NE(st.error().hint.find("--tlscacert"), std::string::npos) << st.error().hint;
}

}  // namespace
}  // namespace gpulab::service
