// The fixture of the tests that span three real dockerds reached over TCP with mutual TLS
// (tests/integration/dockerd/start-lab-hosts.sh): the engines with the test's own view of each
// (over its unix socket), a lab config over them, one `gpulab serve` process, and helpers.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/files.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "service/base/crypto.h"
#include "service_env.h"

namespace gpulab::service::testing {

inline const std::string kApi = "/api/v1/gpu-docker";

struct LabEngine {
  std::string name, tcp, unix_url;
  std::optional<docker::Client> client;  // over the unix socket: the test's own view
};

class LabHostsTest : public ::testing::Test {
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
    tls_ = std::filesystem::path(engines_[0].unix_url.substr(7)).parent_path().parent_path() /
           "gpulab-lab-tls";
    dir_ = std::filesystem::temp_directory_path() / ("gpulab-hosts-" + random_secret(8));
    std::filesystem::create_directories(dir_);
  }

  void TearDown() override {
    if (svc_) svc_->stop();
    remove_lab_containers();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
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

  // The dockerd of engine i (lab1..lab3): its pid, and a restart after a kill (same data root).
  pid_t engine_pid(int i) const {
    auto text = read_file("/tmp/gpulab-dockerd-" + engines_[i].name + "/dockerd.pid");
    return text ? static_cast<pid_t>(parse_int(trim(*text)).value_or(0)) : 0;
  }
  bool restart_engine(int i, std::string* err = nullptr) const {
    RunOptions opts;
    opts.timeout = std::chrono::seconds(120);
    opts.env_add = {{"GPULAB_DOCKERD_IPTABLES", "0"},
                    {"GPULAB_DOCKERD_TCP", "127.0.0.1:2376" + std::to_string(i + 1)},
                    {"GPULAB_DOCKERD_TLS_DIR", tls_.string()}};
    auto r = run_process({"/bin/bash", gpulab::testing::dockerd_script("start-dockerd.sh").string(),
                          engines_[i].name},
                         opts);
    if (err) *err = r.ok() ? r->err : r.error().to_string();
    return r.ok() && r->exit_code == 0;
  }

  std::vector<LabEngine> engines_;
  std::filesystem::path tls_, dir_;
  std::unique_ptr<ServiceProcess> svc_;
};

}  // namespace gpulab::service::testing
