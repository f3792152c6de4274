// What each caller is told, against a real dockerd (issue 13): anonymous requests once users
// exist, per-user views of GPUs and metrics, liveness vs readiness while the engine is away, and
// the port rest period named as such.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "service_env.h"

namespace gpulab::service::testing {
namespace {

class ServiceViews : public ServiceTest {};

// Forwards a unix socket to the engine's, so a test can take the engine away from one service
// (and give it back) without stopping the engine the other tests share.
class EngineRelay {
 public:
  EngineRelay(std::string path, std::string target)
      : path_(std::move(path)), target_(std::move(target)) {}
  ~EngineRelay() { stop(); }
  bool start() {
    ::unlink(path_.c_str());
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a = address(path_);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_fd_, 64) != 0)
      return false;
    running_ = true;
    accept_thread_ = std::thread([this] { accept_loop(); });
    return true;
  }
  // Refuses new connections and cuts the open ones: the engine is unreachable from here on.
  void stop() {
    if (!running_) return;
    running_ = false;
    accept_thread_.join();
    for (auto& t : pumps_) t.join();
    pumps_.clear();
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }

 private:
  static sockaddr_un address(const std::string& p) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", p.c_str());
    return a;
  }
  void accept_loop() {
    while (running_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int in = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0) continue;
      int out = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un a = address(target_);
      if (::connect(out, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(in);
        ::close(out);
        continue;
      }
      pumps_.emplace_back([this, in, out] { pump(in, out); });
    }
  }
  void pump(int a, int b) {
    char buf[65536];
    while (running_) {
      pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
      if (::poll(p, 2, 50) <= 0) continue;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = ::read(p[i].fd, buf, sizeof buf);
        done = n <= 0 || ::write(p[1 - i].fd, buf, static_cast<size_t>(n)) != n;
      }
      if (done) break;
    }
    ::close(a);
    ::close(b);
  }

  std::string path_, target_;
  int listen_fd_ = -1;
  std::atomic<bool> running_{false};
  std::thread accept_thread_;
  std::vector<std::thread> pumps_;
};

TEST_F(ServiceViews, AnonymousRequestsAreRefusedOnceUsersExist) {
  start_service(four_gpu_config(engine_->host, unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  HttpClient anon(svc_->url());
  std::string mine = prefix_ + "-local";
  // Single-user loopback service: no token needed.
  ASSERT_TRUE(ok(anon.post_json(api + "/create", {{"name", mine}, {"image", kBoxImage}})));
  std::string alice = svc_->add_user("alice", false);
  ASSERT_FALSE(alice.empty());
  HttpClient ac(svc_->url(), alice);
  std::string hers = prefix_ + "-alice";
  ASSERT_TRUE(ok(ac.post_json(api + "/create", {{"name", hers}, {"image", kBoxImage}})));
  // Now anonymous requests neither see nor touch anything.
  auto list = anon.get(api + "/list");
  EXPECT_EQ(list.status, 401) << list.body;
  EXPECT_EQ(code(list), "UNAUTHORIZED");
  EXPECT_NE(list.json().value("message", "").find("this service has users"), std::string::npos)
      << list.body;
  EXPECT_EQ(code(anon.post_json(api + "/stop", {{"name", hers}})), "UNAUTHORIZED");
  EXPECT_EQ(code(anon.post_json(api + "/delete", {{"name", mine}})), "UNAUTHORIZED");
  EXPECT_TRUE(client_->inspect_container(hers)->running);
  EXPECT_TRUE(client_->inspect_container(mine)->running);
  EXPECT_EQ(anon.get("/healthz").status, 200);  // open routes stay open
  // The start-up line says how anonymous requests are treated.
  svc_->stop();
  ASSERT_TRUE(svc_->start()) << svc_->log_tail();
  EXPECT_NE(svc_->log_tail().find("users exist: anonymous requests refused"), std::string::npos)
      << svc_->log_tail();
}

TEST_F(ServiceViews, UsersSeeNoOtherUsersContainerNamesInGpusOrMetrics) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["auth_required"] = true;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  HttpClient alice(svc_->url(), svc_->add_user("alice", false));
  HttpClient bob(svc_->url(), svc_->add_user("bob", false));
  HttpClient admin(svc_->url(), svc_->add_user("boss", true));
  std::string a = prefix_ + "-secret-project", b = prefix_ + "-bobs";
  ASSERT_TRUE(
      ok(alice.post_json(api + "/create", {{"name", a}, {"image", kBoxImage}, {"gpu_count", 1}})));
  ASSERT_TRUE(
      ok(bob.post_json(api + "/create", {{"name", b}, {"image", kBoxImage}, {"gpu_count", 1}})));
  auto gpus = bob.get(api + "/gpus");
  ASSERT_TRUE(ok(gpus)) << gpus.body;
  EXPECT_EQ(gpus.body.find(a), std::string::npos) << gpus.body;
  int taken = 0, named = 0;
  Json listing = gpus.json();
  for (const auto& g : listing["data"]["gpus"]) {
    if (g["allocated"] == true) ++taken;
    if (g["allocated_to"] == b) ++named;
  }
  EXPECT_EQ(taken, 2);  // that a GPU is taken is not a secret; by whom is
  EXPECT_EQ(named, 1);
  auto metrics = bob.get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body.find(a), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("container=\"" + b + "\""), std::string::npos) << metrics.body;
  auto all = admin.get("/metrics");
  EXPECT_NE(all.body.find("container=\"" + a + "\""), std::string::npos);
  EXPECT_NE(admin.get(api + "/gpus").body.find(a), std::string::npos);
}

// A refused change and a refused sign-in are in the audit log (who, what, which name, why,
// from where); a refused read by a signed-in user is not (it changes nothing).
TEST_F(ServiceViews, RefusedRequestsAreAudited) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["auth_required"] = true;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  HttpClient alice(svc_->url(), svc_->add_user("alice", false));
  HttpClient bob(svc_->url(), svc_->add_user("bob", false));
  HttpClient admin(svc_->url(), svc_->add_user("boss", true));
  HttpClient stranger(svc_->url(), "glt_not-a-token");
  std::string a = prefix_ + "-hers";
  ASSERT_TRUE(ok(alice.post_json(api + "/create", {{"name", a}, {"image", kBoxImage}})));
  EXPECT_FALSE(ok(bob.post_json(api + "/stop", {{"name", a}})));
  EXPECT_EQ(code(stranger.post_json(api + "/delete", {{"name", a}})), "UNAUTHORIZED");
  EXPECT_FALSE(ok(bob.get(api + "/logs?name=" + a)));  // a read: refused, not audited
  EXPECT_TRUE(client_->inspect_container(a)->running);
  auto log = admin.get(api + "/audit?limit=20");
  ASSERT_TRUE(ok(log)) << log.body;
  bool bob_seen = false, stranger_seen = false;
  const Json entries = log.json()["data"]["entries"];
  for (const auto& e : entries) {
    if (e["outcome"] != "refused") continue;
    EXPECT_NE(e["action"].get<std::string>().rfind("POST ", 0), std::string::npos) << e.dump();
    const std::string detail = e["detail"].get<std::string>();
    if (e["user"] == "bob" && e["action"] == "POST " + api + "/stop" && e["target"] == a &&
        detail.find("from 127.0.0.1") != std::string::npos)
      bob_seen = true;
    if (e["user"] == "(unauthenticated)" && e["action"] == "POST " + api + "/delete" &&
        detail.rfind("UNAUTHORIZED: ", 0) == 0)
      stranger_seen = true;
  }
  EXPECT_TRUE(bob_seen) << log.body;
  EXPECT_TRUE(stranger_seen) << log.body;
}

TEST_F(ServiceViews, ReadinessFailsWhileTheEngineIsUnreachable) {
  const std::string prefix = "unix://";
  ASSERT_EQ(engine_->host.rfind(prefix, 0), 0u) << engine_->host;
  EngineRelay relay((dir_ / "engine.sock").string(), engine_->host.substr(prefix.size()));
  ASSERT_TRUE(relay.start());
  start_service(four_gpu_config("unix://" + (dir_ / "engine.sock").string(), unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  auto ready = c.get("/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_TRUE(ok(ready));
  relay.stop();
  auto live = c.get("/healthz");
  EXPECT_EQ(live.status, 200) << live.body;  // the process answers: alive
  EXPECT_EQ(live.json()["data"]["engine"], false) << live.body;
  auto not_ready = c.get("/readyz");
  EXPECT_EQ(not_ready.status, 503) << not_ready.body;
  EXPECT_EQ(code(not_ready), "ENGINE_UNAVAILABLE");
  EXPECT_EQ(c.get("/api/v1/gpu-docker/list").status, 503);
  ASSERT_TRUE(relay.start());
  EXPECT_EQ(c.get("/readyz").status, 200);
}

TEST_F(ServiceViews, RecreatingDuringThePortRestSaysThePortRests) {
  int base = unique_port_base();
  Json cfg = four_gpu_config(engine_->host, base);
  cfg["port_rest_seconds"] = 60;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  HttpClient c(svc_->url());
  int port = base + 905;
  Json spec = {{"name", prefix_ + "-rest"},
               {"image", kBoxImage},
               {"port", {std::to_string(port) + ":3002"}}};
  ASSERT_TRUE(ok(c.post_json(api + "/create", spec)));
  ASSERT_TRUE(ok(c.post_json(api + "/delete", {{"name", spec["name"]}})));
  auto again = c.post_json(api + "/create", spec);
  EXPECT_EQ(code(again), "PORT_CONFLICT") << again.body;
  std::string msg = again.json().value("message", "");
  EXPECT_EQ(
      msg.rfind("Port(s) resting after release: [" + std::to_string(port) + "] (free again in ", 0),
      0u)
      << msg;
  int left = std::atoi(msg.c_str() + msg.rfind("in ") + 3);  // "free again in 60 s"
  EXPECT_GT(left, 50);
  EXPECT_LE(left, 60);
  EXPECT_NE(again.json().value("hint", "").find("port_rest_seconds"), std::string::npos);
}

}  // namespace
}  // namespace gpulab::service::testing
