// Each TLS failure says which side refused, on the real lab dockerds (mutual TLS): lab2 given a
// client certificate signed by a CA the engines do not trust is down with "the engine refused our
// client certificate"; lab3 given a tls_ca that did not sign the engines' certificate is down
// with "we refused its certificate"; lab1 with the right files serves. The refusals reach
// /healthz, the start-up log (with their hints) and a request that names the host.
#include <gtest/gtest.h>

#include "core/files.h"
#include "core/subprocess.h"
#include "lab_hosts.h"

namespace gpulab::service::testing {
namespace {

class ServiceHostsTls : public LabHostsTest {};

// A client certificate for the service's key, signed by the lab's "other" CA (start-lab-hosts.sh
// made it; the engines trust only the lab CA).
constexpr const char* kForeignClient = R"(set -e
cd "$2"
q() { "$@" >/dev/null 2>&1; }
q openssl req -new -key "$1/key.pem" -out client.csr -subj /CN=gpulab-foreign
printf 'extendedKeyUsage=clientAuth\n' > client.ext
q openssl x509 -req -in client.csr -CA "$1/other-ca.pem" -CAkey "$1/other-ca-key.pem" \
  -CAcreateserial -out foreign-cert.pem -days 2 -extfile client.ext
)";

TEST_F(ServiceHostsTls, EachRefusalSaysWhichSideRefused) {
  if (!which("openssl")) GTEST_SKIP() << "no openssl CLI";
  auto made =
      run_process({"/bin/bash", "-c", kForeignClient, "foreign", lab_.tls.string(), dir_.string()});
  ASSERT_TRUE(made.ok() && made->success()) << (made.ok() ? made->err : made.error().message);
  Json cfg = lab_config();
  cfg["hosts"][1]["tls_cert"] = (dir_ / "foreign-cert.pem").string();
  cfg["hosts"][2]["tls_ca"] = (lab_.tls / "other-ca.pem").string();
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  EXPECT_EQ(host_state(c, "lab1")["state"], "up");
  auto lab2 = host_state(c, "lab2"), lab3 = host_state(c, "lab3");
  EXPECT_EQ(lab2["state"], "down");
  EXPECT_NE(lab2.value("down_reason", "").find("the engine refused our client certificate"),
            std::string::npos)
      << lab2.dump();
  EXPECT_EQ(lab3["state"], "down");
  EXPECT_NE(lab3.value("down_reason", "").find("we refused its certificate, which is not signed"),
            std::string::npos)
      << lab3.dump();
  const std::string log = read_file(dir_ / "svc" / "service.log").value_or("");
  EXPECT_NE(log.find("--tlscacert"), std::string::npos) << log;  // lab2's hint: the engine's CA
  auto asked = create(c, "x1", 0, "lab2");
  EXPECT_EQ(asked.status, 503) << asked.body;
  EXPECT_NE(asked.body.find("refused our client certificate"), std::string::npos) << asked.body;
}

}  // namespace
}  // namespace gpulab::service::testing
