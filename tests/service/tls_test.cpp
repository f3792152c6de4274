// gpulab serve on a lab network: HTTPS with a test CA made here by openssl (a client that trusts
// it gets through, one that does not is refused), plain HTTP beyond loopback refused unless asked
// for, and failed token checks slowed down per address (429 + Retry-After, audited) while
// another address is served.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "service_env.h"

namespace gpulab::service::testing {
namespace {

namespace fs = std::filesystem;

class ServiceTls : public ServiceTest {
 protected:
  // A CA and a server certificate for 127.0.0.1 signed by it, in dir_/tls; false if openssl fails.
  bool make_certificates() {
    tls_ = dir_ / "tls";
    fs::create_directories(tls_);
    std::string d = tls_.string();
    std::string cmd =
        "cd '" + d + "' && { " +
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
        "-subj /CN=gpulab-test-ca && "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem "
        "-days 2 -subj /CN=another-ca && "
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
        "-subj /CN=127.0.0.1 && "
        "printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf && "
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
        "-out server.pem -days 2 -extfile ext.cnf; } > openssl.log 2>&1";
    return std::system(cmd.c_str()) == 0;
  }
  std::string https_url() const { return "https://127.0.0.1:" + std::to_string(svc_->port()); }
  fs::path tls_;
};

TEST_F(ServiceTls, ClientsThatTrustTheCaGetThroughOthersAreRefused) {
  ASSERT_TRUE(make_certificates()) << "openssl failed; see " << (tls_ / "openssl.log");
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["tls_cert"] = (tls_ / "server.pem").string();
  cfg["tls_key"] = (tls_ / "server.key").string();
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;

  HttpClient trusting(https_url());
  trusting.set_ca_file((tls_ / "ca.pem").string());
  auto r = trusting.get("/healthz");
  EXPECT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_TRUE(ok(trusting.get("/api/v1/gpu-docker/list")));

  HttpClient other(https_url());
  other.set_ca_file((tls_ / "other-ca.pem").string());
  auto refused = other.get("/healthz");
  EXPECT_EQ(refused.status, 0) << refused.body;
  EXPECT_FALSE(refused.error.empty());

  HttpClient plain(svc_->url());  // http:// to the HTTPS port: no answer in clear text
  auto clear = plain.get("/healthz");
  EXPECT_NE(clear.status, 200) << clear.body;

  // The dashboard's session cookie is Secure over HTTPS.
  std::string admin = svc_->add_user("tls-admin", true);
  auto signin = trusting.post_json("/api/v1/gpu-docker/session", Json{{"token", admin}});
  ASSERT_EQ(signin.status, 200) << signin.body;
  EXPECT_NE(signin.headers.find("; Secure"), std::string::npos) << signin.headers;
  EXPECT_NE(svc_->log_tail().find("listening on https://"), std::string::npos);
}

TEST_F(ServiceTls, PlainHttpBeyondLoopbackIsRefusedUnlessAskedFor) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["listen"] = "0.0.0.0:0";
  svc_ = std::make_unique<ServiceProcess>(dir_, cfg);
  ASSERT_FALSE(svc_->start()) << "plain HTTP on 0.0.0.0 was served";
  EXPECT_NE(svc_->log_tail().find("refusing to serve plain HTTP on 0.0.0.0"), std::string::npos)
      << svc_->log_tail();
}

TEST_F(ServiceTls, FailedTokenChecksAreThrottledPerAddress) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["auth_required"] = true;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  std::string good = svc_->add_user("carol", true);
  HttpClient guesser(svc_->url(), "glt_guess");
  HttpClient neighbour(svc_->url(), good);
  neighbour.set_local_address("127.0.0.2");
  int unauthorized = 0, throttled = 0, neighbour_ok = 0;
  std::string retry_after;
  for (int i = 0; i < 200; ++i) {
    guesser.set_token("glt_guess-" + std::to_string(i));
    auto r = guesser.get(api + "/list");
    if (r.status == 401) ++unauthorized;
    if (r.status == 429) {
      ++throttled;
      EXPECT_EQ(code(r), "TOO_MANY_REQUESTS") << r.body;
      auto at = r.headers.find("Retry-After: ");
      if (at != std::string::npos) retry_after = r.headers.substr(at + 13, 3);
    }
    if (i % 20 == 0 && ok(neighbour.get(api + "/list"))) ++neighbour_ok;
  }
  std::printf(
      "200 bad tokens from 127.0.0.1: %d answered 401, %d answered 429 (Retry-After %s); "
      "%d of 10 requests from 127.0.0.2 served\n",
      unauthorized, throttled, retry_after.c_str(), neighbour_ok);
  // 10 free failures (auth_failures_before_throttle's default), then a wait of 1 s, 2 s, ...:
  // a further 401 only when a wait ran out during the loop.
  EXPECT_GE(unauthorized, 10);
  EXPECT_LE(unauthorized, 16);
  EXPECT_EQ(unauthorized + throttled, 200);
  EXPECT_FALSE(retry_after.empty());
  EXPECT_EQ(neighbour_ok, 10);

  auto log = neighbour.get(api + "/audit?limit=50");
  ASSERT_TRUE(ok(log)) << log.body;
  int audited = 0;
  const Json doc = log.json();  // held: a range over a temporary's member would dangle
  for (const auto& e : doc["data"]["entries"])
    if (e["outcome"] == "refused" &&
        e["detail"].get<std::string>().rfind("TOO_MANY_REQUESTS: ", 0) == 0)
      ++audited;
  EXPECT_GT(audited, 0) << log.body;
}

}  // namespace
}  // namespace gpulab::service::testing
