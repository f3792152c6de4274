// Many hosts, one service, on three real dockerds reached over TCP with mutual TLS
// (tests/integration/dockerd/start-lab-hosts.sh): placement (pack, spread, an asked host, the
// largest-host error, each host's ports in its own network), a quota summed over hosts, a host
// whose CA is not ours refused, plain TCP refused without insecure, a host SIGKILLed and back, a
// host left out of the config and back, events from every host, and 50 concurrent creates.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>
#include <vector>

#include "core/files.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "lab_hosts.h"
#include "service/base/config.h"
#include "service/base/crypto.h"

namespace gpulab::service::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

class ServiceHosts : public LabHostsTest {};

// Whether something accepts a TCP connection at ip:port (a published port's proxy does).
bool tcp_accepts(const std::string& ip, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr) == 1 &&
                  ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

TEST_F(ServiceHosts, PackFillsTheFullestHostAndSpreadTheEmptiest) {
  for (const std::string policy : {"pack", "spread"}) {
    start(lab_config(policy), policy);
    if (HasFatalFailure()) return;
    HttpClient c(svc_->url());
    std::vector<std::string> hosts;
    for (int i = 0; i < 3; ++i) {
      auto r = create(c, policy + std::to_string(i), 1);
      ASSERT_TRUE(ok(r)) << r.body;
      hosts.push_back(r.json()["data"]["host"]);
    }
    // pack: lab1 (2 GPUs) first and until full, then lab3 (2 free) before lab2 (4 free).
    // spread: lab2 (4 free) until it has no more free than the others, then lab1.
    if (policy == "pack")
      EXPECT_EQ(hosts, (std::vector<std::string>{"lab1", "lab1", "lab3"}));
    else
      EXPECT_EQ(hosts, (std::vector<std::string>{"lab2", "lab2", "lab1"}));
    for (int i = 0; i < 3; ++i) {
      int idx = hosts[i] == "lab1" ? 0 : hosts[i] == "lab2" ? 1 : 2;
      EXPECT_TRUE(on_engine(idx, policy + std::to_string(i))) << "not on " << hosts[i];
    }
    auto list = c.get(kApi + "/list").json()["data"]["containers"];
    ASSERT_EQ(list.size(), 3u);
    EXPECT_EQ(list[0]["host"], hosts[0]);
    EXPECT_EQ(list[0]["host_state"], "up");
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(ok(c.post_json(kApi + "/delete", {{"name", policy + std::to_string(i)}})));
    svc_->stop();
    svc_.reset();
  }
}

TEST_F(ServiceHosts, AskedHostLargestHostErrorAndUnknownHost) {
  start(lab_config());
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  auto r = create(c, "asked", 1, "lab3");
  ASSERT_TRUE(ok(r)) << r.body;
  EXPECT_EQ(r.json()["data"]["host"], "lab3");
  EXPECT_EQ(r.json()["data"]["ssh_host"], engines_[2].address);
  // Each engine has a network of its own, as a server has: the port is at lab3's address only.
  const int ssh_port = r.json()["data"].value("ssh_port", 0);
  ASSERT_GT(ssh_port, 0) << r.body;
  EXPECT_TRUE(tcp_accepts(engines_[2].address, ssh_port));
  EXPECT_FALSE(tcp_accepts("127.0.0.1", ssh_port));
  // Not probed at lab1's address: the lab's engines are shared with the service tests running
  // beside this one, whose containers may publish the same port number there (a full make test
  // saw it open once); the container's absence from lab1 is what on_engine(0, ...) checks.
  EXPECT_TRUE(on_engine(2, "asked"));
  EXPECT_FALSE(on_engine(0, "asked"));

  auto big = create(c, "big", 5);
  EXPECT_EQ(code(big), "GPU_ALLOCATION_FAILED") << big.body;
  EXPECT_NE(big.body.find("the largest host has 4 GPUs"), std::string::npos) << big.body;
  EXPECT_EQ(big.body.find("delete unused"), std::string::npos) << big.body;

  auto unknown = create(c, "nowhere", 0, "nope");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_NE(unknown.body.find("'nope'"), std::string::npos) << unknown.body;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(on_engine(i, "nowhere"));

  auto gpus = c.get(kApi + "/gpus").json()["data"]["gpus"];
  ASSERT_EQ(gpus.size(), 8u);
  int held = 0;
  for (const auto& g : gpus) held += g["allocated"].get<bool>() ? 1 : 0;
  EXPECT_EQ(held, 1);
  auto metrics = c.get("/metrics").body;
  EXPECT_NE(metrics.find("gpulab_host_up{host=\"lab2\"} 1"), std::string::npos) << metrics;
}

TEST_F(ServiceHosts, QuotaIsSummedOverHosts) {
  Json cfg = lab_config();
  cfg["auth_required"] = true;
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient admin(svc_->url(), svc_->add_user("boss", true));
  HttpClient alice(svc_->url(), svc_->add_user("alice", false));
  ASSERT_TRUE(ok(admin.post_json(kApi + "/quotas", {{"user", "alice"}, {"max_gpus", 3}})));
  ASSERT_TRUE(ok(create(alice, "qa", 2, "lab1")));
  ASSERT_TRUE(ok(create(alice, "qb", 1, "lab2")));
  auto over = create(alice, "qc", 1, "lab3");  // lab3 has 2 free GPUs; alice has used her 3
  EXPECT_EQ(code(over), "QUOTA_EXCEEDED") << over.body;
  EXPECT_FALSE(on_engine(2, "qc"));
}

TEST_F(ServiceHosts, ForeignCaRefusesThatHostAndPlainTcpNeedsInsecure) {
  Json cfg = lab_config();
  cfg["hosts"][1]["tls_ca"] = (lab_.tls / "other-ca.pem").string();
  start(cfg);  // lab2's certificate is not signed by that CA: lab2 is down, the others serve
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  EXPECT_EQ(host_state(c, "lab2")["state"], "down") << c.get("/healthz").body;
  EXPECT_EQ(host_state(c, "lab1")["state"], "up");
  EXPECT_EQ(c.get("/readyz").status, 200);
  auto refused = create(c, "foreign", 0, "lab2");
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("lab2"), std::string::npos) << refused.body;
  EXPECT_NE(svc_->log_tail().find("lab2"), std::string::npos);
  svc_->stop();
  svc_.reset();

  // Plain TCP without insecure: the config is refused, naming the field.
  Json plain = lab_config();
  for (const char* k : {"tls_ca", "tls_cert", "tls_key"}) plain["hosts"][0].erase(k);
  auto cfg_text = plain.dump();
  auto parsed = config_from_json(cfg_text);
  ASSERT_TRUE(parsed.ok());
  auto st = validate_config(*parsed);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("hosts[0].tls_ca"), std::string::npos) << st.error().message;
  plain["hosts"][0]["insecure"] = true;
  auto insecure = config_from_json(plain.dump());
  ASSERT_TRUE(insecure.ok());
  EXPECT_TRUE(validate_config(*insecure).ok());
}

// SIGKILL lab2's dockerd: marked down within 30 s, its container unreachable with its GPUs
// booked, asking for it a quick 503, creates going elsewhere; restarted, it is up again and the
// reconciler frees what was removed meanwhile.
TEST_F(ServiceHosts, KilledHostIsMarkedDownAndReconciledWhenBack) {
  start(lab_config());
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_TRUE(ok(create(c, "stays", 1, "lab2")));
  ASSERT_TRUE(ok(create(c, "goes", 1, "lab2")));
  const pid_t pid = engine_pid(1);
  ASSERT_GT(pid, 0);
  auto killed_at = Clock::now();
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  while (host_state(c, "lab2")["state"] != "down" &&
         Clock::now() - killed_at < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  double down_s = std::chrono::duration<double>(Clock::now() - killed_at).count();
  std::printf("lab2 marked down %.1f s after SIGKILL\n", down_s);
  ASSERT_EQ(host_state(c, "lab2")["state"], "down");
  EXPECT_NE(c.get("/metrics").body.find("gpulab_host_up{host=\"lab2\"} 0"), std::string::npos);

  auto list = c.get(kApi + "/list").json()["data"]["containers"];
  ASSERT_EQ(list.size(), 2u);
  for (const auto& x : list) EXPECT_EQ(x["status"], "unreachable") << x.dump();
  auto status = c.get(kApi + "/status").json()["data"];
  EXPECT_EQ(status["used_gpu_indices"].size(), 2u);  // still booked

  auto t0 = Clock::now();
  auto asked = create(c, "there", 0, "lab2");
  double asked_s = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(asked.status, 503) << asked.body;
  EXPECT_NE(asked.body.find("lab2"), std::string::npos);
  EXPECT_LT(asked_s, 2.0);
  auto touch = c.post_json(kApi + "/stop", {{"name", "stays"}});
  EXPECT_EQ(touch.status, 503) << touch.body;
  auto elsewhere = create(c, "elsewhere", 3);  // only lab2 had 3 free; now none has
  EXPECT_EQ(code(elsewhere), "GPU_ALLOCATION_FAILED") << elsewhere.body;
  auto moved = create(c, "moved", 1);
  ASSERT_TRUE(ok(moved)) << moved.body;
  EXPECT_NE(moved.json()["data"]["host"], "lab2");

  // Back: restart its engine and remove one container before the service looks.
  std::string err;
  ASSERT_TRUE(restart_engines(&err)) << err;
  (void)engines_[1].client->remove_container("goes", true);
  auto back_at = Clock::now();
  bool reconciled = false;
  while (!reconciled && Clock::now() - back_at < std::chrono::seconds(30)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    auto l = c.get(kApi + "/list").json()["data"]["containers"];
    bool goes = false, stays_ok = false;
    for (const auto& x : l) {
      if (x["name"] == "goes") goes = true;
      if (x["name"] == "stays" && x["host_state"] == "up") stays_ok = true;
    }
    reconciled = !goes && stays_ok && host_state(c, "lab2")["state"] == "up";
  }
  std::printf("lab2 up and reconciled %.1f s after its restart\n",
              std::chrono::duration<double>(Clock::now() - back_at).count());
  EXPECT_TRUE(reconciled) << c.get(kApi + "/list").body;
  status = c.get(kApi + "/status").json()["data"];
  EXPECT_EQ(status["used_gpu_indices"].size(), 2u);  // stays + moved; goes' GPU is free again
}

// A host left out of the config (an admin's edit): its rows stay, shown unreachable and "not
// configured", a request on them is a 503 naming the host, and the start-up log says so; with the
// host back in the config they are as they were.
TEST_F(ServiceHosts, AHostLeftOutOfTheConfigKeepsItsRowsUntilItIsBack) {
  start(lab_config());
  if (HasFatalFailure()) return;
  HttpClient first(svc_->url());
  ASSERT_TRUE(ok(create(first, "kept", 1, "lab3")));
  svc_->stop();
  Json two = lab_config();
  two["hosts"].erase(2);
  start(two);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  auto list = c.get(kApi + "/list").json()["data"]["containers"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["host"], "lab3");
  EXPECT_EQ(list[0]["host_state"], "not configured");
  EXPECT_EQ(list[0]["status"], "unreachable");
  auto stop = c.post_json(kApi + "/stop", {{"name", "kept"}});
  EXPECT_EQ(stop.status, 503) << stop.body;
  EXPECT_NE(stop.body.find("'lab3', which is not in this service's hosts"), std::string::npos)
      << stop.body;
  auto log = read_file(dir_ / "svc" / "service.log").value_or("");
  EXPECT_NE(log.find("1 container(s) on host 'lab3', which is not in hosts"), std::string::npos);
  EXPECT_TRUE(on_engine(2, "kept"));
  svc_->stop();
  start(lab_config());
  if (HasFatalFailure()) return;
  list = HttpClient(svc_->url()).get(kApi + "/list").json()["data"]["containers"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["host_state"], "up") << list[0].dump();
  EXPECT_EQ(list[0]["status"], "running") << list[0].dump();
}

// Every host's event stream reaches the book, not the first host's only: with the periodic pass
// a minute away, a container stopped and one removed on lab3's engine behind the service's back
// show in /list within seconds.
TEST_F(ServiceHosts, EventsFromEveryHostReachTheBookWithinSeconds) {
  Json cfg = lab_config();
  cfg["reconcile_interval_seconds"] = 60;
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_TRUE(ok(create(c, "evstop", 1, "lab3")));
  ASSERT_TRUE(ok(create(c, "evgone", 1, "lab3")));
  auto row = [&](const std::string& name) {
    auto list = c.get(kApi + "/list").json()["data"]["containers"];
    for (const auto& x : list)
      if (x["name"] == name) return x;
    return Json();
  };
  // The streams open as the service starts: act behind its back once every host's is followed.
  const auto followed = Clock::now() + std::chrono::seconds(20);
  while (event_watchers_started(c) < static_cast<long>(engines_.size()) && Clock::now() < followed)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GE(event_watchers_started(c), static_cast<long>(engines_.size()))
      << "no event stream per host in 20 s" << log_lines();
  auto t0 = Clock::now();
  ASSERT_TRUE(engines_[2].client->stop_container("evstop", 1).ok());
  ASSERT_TRUE(engines_[2].client->remove_container("evgone", true).ok());
  bool seen = false;
  while (!seen && Clock::now() - t0 < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    seen = row("evgone").is_null() && row("evstop")["status"] != "running";
  }
  const double took = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("lab3's stop and removal reached the book in %.1f s (periodic pass: 60 s)\n", took);
  EXPECT_TRUE(seen) << c.get(kApi + "/list").body << log_lines();
  EXPECT_LT(took, 15.0);
  auto status = c.get(kApi + "/status").json()["data"];
  EXPECT_EQ(status["used_gpu_indices"].size(), 1u) << status.dump();  // evgone's GPU is free
}

TEST_F(ServiceHosts, FiftyConcurrentCreatesNeverShareAGpuOrPort) {
  Json cfg = lab_config("spread");
  cfg["worker_threads"] = 16;
  // This test is about GPUs and ports under concurrency, not a slow engine: 50 creates at once on
  // a loaded 2-core machine kept a healthy engine past the 2 s default once (503
  // ENGINE_UNAVAILABLE "did not answer within 2 s"); the frozen-host tests keep the default.
  cfg["host_answer_seconds"] = 15;
  start(cfg);
  if (HasFatalFailure()) return;
  constexpr int kCreates = 50;
  std::atomic<int> created{0}, no_gpu{0}, other{0};
  std::vector<std::string> others(kCreates);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCreates; ++i)
    threads.emplace_back([&, i] {
      HttpClient c(svc_->url());
      auto r = create(c, "c" + std::to_string(i), i % 5 == 0 ? 1 : 0);  // 10 ask for 1 of 8
      if (ok(r))
        ++created;
      else if (code(r) == "GPU_ALLOCATION_FAILED")
        ++no_gpu;
      else  // what came back, or curl's reason when nothing did (an empty reply, a timeout)
        others[i] = "HTTP " + std::to_string(r.status) + " " + r.body + r.error, ++other;
    });
  for (auto& t : threads) t.join();
  std::printf("50 creates on 3 hosts: %d created, %d without a free GPU, %d other\n",
              created.load(), no_gpu.load(), other.load());
  std::erase(others, std::string());
  EXPECT_EQ(other.load(), 0) << join(others, "\n") << log_lines();
  EXPECT_EQ(no_gpu.load(), 2);
  HttpClient c(svc_->url());
  auto list = c.get(kApi + "/list").json()["data"]["containers"];
  EXPECT_EQ(static_cast<int>(list.size()), created.load()) << log_lines();
  std::set<std::string> gpus, ports;
  std::map<std::string, int> per_host;
  for (const auto& x : list) {
    ++per_host[x["host"]];
    EXPECT_TRUE(
        ports.insert(x["host"].get<std::string>() + ":" + std::to_string(x["ssh_port"].get<int>()))
            .second)
        << "port given twice: " << x.dump();
    for (const auto& u : x["gpu_uuids"]) EXPECT_TRUE(gpus.insert(u).second) << "GPU twice: " << u;
  }
  EXPECT_EQ(per_host.size(), 3u);
  // The engines agree: every container published exactly its booked port on its host.
  int on_engines = 0;
  for (int i = 0; i < 3; ++i) {
    docker::ListOptions lo;
    lo.all = true;
    lo.labels = {"gpulab.managed=true"};
    auto l = engines_[i].client->list_containers(lo);
    ASSERT_TRUE(l.ok());
    on_engines += static_cast<int>(l->size());
  }
  EXPECT_EQ(on_engines, created.load());
}

}  // namespace
}  // namespace gpulab::service::testing
