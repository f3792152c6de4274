// Many hosts, one service, on three real dockerds reached over TCP with mutual TLS
// (tests/integration/dockerd/start-lab-hosts.sh): placement (pack, spread, an asked host, the
// largest-host error), a quota summed over hosts, a host whose CA is not ours refused, plain TCP
// refused without insecure, a host SIGKILLed and back, and 50 concurrent creates.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "core/files.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "service/base/config.h"
#include "service/base/crypto.h"
#include "service_env.h"

namespace gpulab::service::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
const std::string kApi = "/api/v1/gpu-docker";

struct LabEngine {
  std::string name, tcp, unix_url;
  std::optional<docker::Client> client;  // over the unix socket: the test's own view
};

class ServiceHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    RunOptions opts;
    opts.timeout = std::chrono::seconds(180);
    auto r =
        run_process({"/bin/bash", gpulab::testing::dockerd_script("start-lab-hosts.sh")}, opts);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    if (r->exit_code == 77) GTEST_SKIP() << "cannot run the lab's dockerds here: " << r->err;
    ASSERT_EQ(r->exit_code, 0) << r->err;
    for (const auto& line : split(trim(r->out), '\n')) {
      auto f = split(line, ' ');
      ASSERT_EQ(f.size(), 3u) << line;
      LabEngine e{f[0], f[1], f[2], std::nullopt};
      auto ep = docker::Endpoint::parse(e.unix_url);
      ASSERT_TRUE(ep.ok());
      auto c = docker::Client::connect(*ep);
      ASSERT_TRUE(c.ok()) << c.error().to_string();
      e.client.emplace(std::move(*c));
      auto st = ensure_service_images(*e.client, false);
      ASSERT_TRUE(st.ok()) << st.error().to_string();
      engines_.push_back(std::move(e));
    }
    ASSERT_EQ(engines_.size(), 3u);
    remove_lab_containers();
    tls_ = fs::path(engines_[0].unix_url.substr(7)).parent_path().parent_path() / "gpulab-lab-tls";
    dir_ = fs::temp_directory_path() / ("gpulab-hosts-" + random_secret(8));
    fs::create_directories(dir_);
  }

  void TearDown() override {
    if (svc_) svc_->stop();
    remove_lab_containers();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The services' containers on the three engines, one thread per engine (the lab engines are
  // the tests' own: whatever a killed or failed test left goes too).
  void remove_lab_containers() {
    std::vector<std::thread> threads;
    for (auto& e : engines_)
      threads.emplace_back([&e] {
        if (!e.client || !e.client->ping()) return;
        docker::ListOptions lo;
        lo.all = true;
        lo.labels = {"gpulab.managed=true"};
        if (auto list = e.client->list_containers(lo))
          for (const auto& c : *list) (void)e.client->remove_container(c.id, true);
      });
    for (auto& t : threads) t.join();
  }

  // lab1: 2 GPUs, lab2: 4, lab3: 2 (declared, no devices); published ports on 127.0.0.2-4.
  Json host_json(int i, int gpus) const {
    Json g = Json::array();
    for (int k = 0; k < gpus; ++k)
      g.push_back({{"uuid", "GPU-" + engines_[i].name + "-" + std::to_string(k)},
                   {"index", k},
                   {"vendor", "nvidia"}});
    return {{"name", engines_[i].name},
            {"url", engines_[i].tcp},
            {"tls_ca", (tls_ / "ca.pem").string()},
            {"tls_cert", (tls_ / "cert.pem").string()},
            {"tls_key", (tls_ / "key.pem").string()},
            {"address", "127.0.0." + std::to_string(i + 2)},
            {"bind_ip", "127.0.0." + std::to_string(i + 2)},
            {"gpus", g}};
  }
  Json lab_config(const std::string& policy = "pack") const {
    return {{"hosts", Json::array({host_json(0, 2), host_json(1, 4), host_json(2, 2)})},
            {"allocation_policy", policy},
            {"host_check_seconds", 1},
            {"ssh_port_base", unique_port_base()},
            {"image_allowlist", Json::array({"gpulab-test/*"})}};
  }
  void start(Json cfg, const std::string& sub = "svc") {
    svc_ = std::make_unique<ServiceProcess>(dir_ / sub, std::move(cfg));
    ASSERT_TRUE(svc_->start()) << svc_->log_tail();
  }
  HttpResult create(HttpClient& c, const std::string& name, int gpus,
                    const std::string& host = {}) {
    Json body = {{"name", name}, {"image", kBoxImage}, {"gpu_count", gpus}};
    if (!host.empty()) body["host"] = host;
    return c.post_json(kApi + "/create", body);
  }
  Json host_state(HttpClient& c, const std::string& name) {
    Json health = c.get("/healthz").json();  // held: the loop reads inside it
    for (const auto& h : health["data"]["hosts"])
      if (h["name"] == name) return h;
    return Json();
  }
  bool on_engine(int i, const std::string& name) {
    return engines_[i].client->inspect_container(name).ok();
  }

  // The service log's lines about hosts and the reconciler (what a failed check needs).
  std::string log_lines() const {
    auto text = read_file(dir_ / "svc" / "service.log");
    std::string out;
    if (!text) return out;
    for (const auto& l : split(*text, '\n'))
      for (const char* w : {"reconcil", "remov", "releas", "down", "up again", "fail", "warn"})
        if (l.find(w) != std::string::npos) {
          out += l + "\n";
          break;
        }
    return out;
  }

  std::vector<LabEngine> engines_;
  fs::path tls_, dir_;
  std::unique_ptr<ServiceProcess> svc_;
};

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
  EXPECT_EQ(r.json()["data"]["ssh_host"], "127.0.0.4");
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
  cfg["hosts"][1]["tls_ca"] = (tls_ / "other-ca.pem").string();
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
  auto pid_text = read_file("/tmp/gpulab-dockerd-lab2/dockerd.pid");
  ASSERT_TRUE(pid_text.ok());
  const pid_t pid = static_cast<pid_t>(parse_int(trim(*pid_text)).value_or(0));
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
  RunOptions opts;
  opts.timeout = std::chrono::seconds(120);
  opts.env_add = {{"GPULAB_DOCKERD_IPTABLES", "0"},
                  {"GPULAB_DOCKERD_TCP", "127.0.0.1:23762"},
                  {"GPULAB_DOCKERD_TLS_DIR", tls_.string()}};
  auto back = run_process(
      {"/bin/bash", gpulab::testing::dockerd_script("start-dockerd.sh").string(), "lab2"}, opts);
  ASSERT_TRUE(back.ok() && back->exit_code == 0) << (back.ok() ? back->err : "");
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

TEST_F(ServiceHosts, FiftyConcurrentCreatesNeverShareAGpuOrPort) {
  Json cfg = lab_config("spread");
  cfg["worker_threads"] = 16;
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
      else
        others[i] = r.body, ++other;
    });
  for (auto& t : threads) t.join();
  std::printf("50 creates on 3 hosts: %d created, %d without a free GPU, %d other\n",
              created.load(), no_gpu.load(), other.load());
  EXPECT_EQ(other.load(), 0) << join(others, "\n");
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
