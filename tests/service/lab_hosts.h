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
#include "lab_host_engines.h"
#include "service/base/crypto.h"
#include "service_env.h"

namespace gpulab::service::testing {

// Seconds on the steady clock since t.
inline double secs_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class LabHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lab_ = start_lab_host_engines();
    if (!lab_.skip.empty()) GTEST_SKIP() << lab_.skip;
    ASSERT_TRUE(lab_.error.empty()) << lab_.error;
    ASSERT_EQ(engines_.size(), 3u);
    remove_lab_containers();
    dir_ = std::filesystem::temp_directory_path() / ("gpulab-hosts-" + random_secret(8));
    std::filesystem::create_directories(dir_);
  }

  void TearDown() override {
    if (svc_) svc_->stop();
    remove_lab_containers();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // The services' containers on the three engines (the lab engines are the tests' own: whatever
  // a killed or failed test left goes too).
  void remove_lab_containers() { remove_lab_managed_containers(lab_); }

  // lab1: 2 GPUs, lab2: 4, lab3: 2 (declared, no devices); published ports at each address.
  Json host_json(int i, int gpus) const { return lab_host_entry(lab_, i, gpus); }
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
  // The host's entry in /healthz ({"name", "state", ...}); null if absent or the service is down.
  Json host_state(HttpClient& c, const std::string& name) {
    auto r = c.get("/healthz");
    if (r.status == 0) return Json();
    Json health = r.json();  // held: the loop reads inside it
    for (const auto& h : health["data"]["hosts"])
      if (h["name"] == name) return h;
    return Json();
  }
  // By name only: Docker falls back to an id prefix, so "e1" alone would find another test's
  // container on the shared lab engine whose id starts with e1 (ServiceHostsRefusedPort, once).
  bool on_engine(int i, const std::string& name) {
    auto info = engines_[i].client->inspect_container(name);
    return info.ok() && info->name == name;
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
  pid_t engine_pid(int i) const { return lab_engine_pid(engines_[i]); }
  // Engines killed by a test come back on their data roots (start-lab-hosts.sh restarts what
  // is not running); the test's clients are pointed at them again.
  bool restart_engines(std::string* err = nullptr) {
    LabHostEngines again = start_lab_host_engines();
    std::string why =
        !again.error.empty()  ? again.error
        : !again.skip.empty() ? again.skip
        : again.engines.size() != 3
            ? "start-lab-hosts.sh gave " + std::to_string(again.engines.size()) + " engines, not 3"
            : std::string();
    if (err) *err = why;
    if (!why.empty()) return false;
    lab_ = std::move(again);
    return true;
  }

  LabHostEngines lab_;
  std::vector<LabHostEngine>& engines_ = lab_.engines;
  std::filesystem::path dir_;
  std::unique_ptr<ServiceProcess> svc_;
};

}  // namespace gpulab::service::testing
