// TCP + TLS to a real engine: a third dockerd listens on 127.0.0.1 with --tlsverify and
// certificates made here by openssl; the client connects with DOCKER_CERT_PATH's files, and is
// refused without a client certificate.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/files.h"
#include "core/subprocess.h"
#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

namespace fs = std::filesystem;

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, as `docker` expects them.
constexpr const char* kMakeCerts = R"(set -e
cd "$1"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 2 -subj /CN=gpulab-test-ca
openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj /CN=127.0.0.1
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server-cert.pem -days 2 -extfile server.ext
openssl req -newkey rsa:2048 -nodes -keyout key.pem -out client.csr -subj /CN=gpulab-client
printf 'extendedKeyUsage=clientAuth\n' > client.ext
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -days 2 -extfile client.ext
)";

TEST(Tls, ClientCertificateConnectsAndNoCertificateIsRefused) {
  if (!which("openssl")) GTEST_SKIP() << "no openssl CLI to make test certificates";
  fs::path dir = fs::temp_directory_path() / testing::unique_name("tls");
  fs::create_directories(dir);
  auto certs = run_process({"/bin/bash", "-c", kMakeCerts, "make-certs", dir.string()});
  ASSERT_TRUE(certs.ok() && certs->success())
      << (certs.ok() ? certs->err : certs.error().to_string());

  int port = free_port();
  std::string name = "tls" + std::to_string(::getpid() % 100000);
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env_add = {{"GPULAB_DOCKERD_TCP", "127.0.0.1:" + std::to_string(port)},
                  {"GPULAB_DOCKERD_TLS_DIR", dir.string()}};
  auto started =
      run_process({"/bin/bash", testing::dockerd_script("start-dockerd.sh").string(), name}, opts);
  ASSERT_TRUE(started.ok());
  if (started->exit_code == 77) GTEST_SKIP() << started->err;
  struct Stop {
    std::string name;
    fs::path dir;
    ~Stop() {
      (void)run_process(
          {"/bin/bash", testing::dockerd_script("stop-dockerd.sh").string(), "--purge", name});
      fs::remove_all(dir);
    }
  } stop{name, dir};
  ASSERT_EQ(started->exit_code, 0) << started->err;

  // As the docker CLI would: DOCKER_HOST + DOCKER_TLS_VERIFY + DOCKER_CERT_PATH.
  ::setenv("DOCKER_HOST", ("tcp://127.0.0.1:" + std::to_string(port)).c_str(), 1);
  ::setenv("DOCKER_TLS_VERIFY", "1", 1);
  ::setenv("DOCKER_CERT_PATH", dir.c_str(), 1);
  auto ep = Endpoint::from_env();
  ::unsetenv("DOCKER_HOST");
  ::unsetenv("DOCKER_TLS_VERIFY");
  ::unsetenv("DOCKER_CERT_PATH");
  ASSERT_TRUE(ep.ok());
  EXPECT_TRUE(ep->tls);
  EXPECT_EQ(ep->cert_file, (dir / "cert.pem").string());

  auto client = Client::connect(*ep);
  ASSERT_TRUE(client.ok()) << client.error().to_string();
  EXPECT_TRUE(client->ping().ok());
  auto info = client->info();
  ASSERT_TRUE(info.ok()) << info.error().to_string();
  EXPECT_NE(info->docker_root_dir.find("gpulab-dockerd-" + name), std::string::npos)
      << info->docker_root_dir;

  // The server demands a client certificate: without one the handshake fails.
  Endpoint anonymous = *ep;
  anonymous.cert_file.clear();
  anonymous.key_file.clear();
  auto refused = Client::connect(anonymous);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Code::kUnavailable) << refused.error().to_string();

  // A CA that did not sign the server's certificate is not trusted.
  Endpoint wrong_ca = *ep;
  wrong_ca.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  auto untrusted = Client::connect(wrong_ca);
  ASSERT_FALSE(untrusted.ok());
  EXPECT_EQ(untrusted.error().code, Code::kUnavailable) << untrusted.error().to_string();
}

}  // namespace
}  // namespace gpulab::docker
