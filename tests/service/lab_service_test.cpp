// The three-engine service fixture (lab_service_test.h).
#include "lab_service_test.h"

#include <thread>

#include "service/base/crypto.h"

namespace gpulab::service::testing {

namespace fs = std::filesystem;

void LabServiceTest::SetUp() {
  lab_ = start_lab_host_engines();
  if (!lab_.skip.empty()) GTEST_SKIP() << lab_.skip;
  ASSERT_TRUE(lab_.error.empty()) << lab_.error;
  ASSERT_EQ(lab_.engines.size(), 3u);
  remove_lab_managed_containers(lab_);
  dir_ = fs::temp_directory_path() / ("gpulab-labsvc-" + random_secret(8));
  fs::create_directories(dir_);
  prefix_ = "s" + random_secret(4);
}

void LabServiceTest::TearDown() {
  if (svc_) svc_->stop();
  remove_lab_managed_containers(lab_);
  std::error_code ec;
  if (!dir_.empty()) fs::remove_all(dir_, ec);
}

Json LabServiceTest::lab_config() const {
  return {{"hosts", Json::array({lab_host_entry(lab_, 0, 2), lab_host_entry(lab_, 1, 4),
                                 lab_host_entry(lab_, 2, 2)})},
          {"allocation_policy", "pack"},
          {"host_check_seconds", 1},
          {"reconcile_interval_seconds", 2},
          {"auth_required", true},
          {"stop_timeout_seconds", 1},
          {"ssh_port_base", unique_port_base()},
          {"image_allowlist", Json::array({"gpulab-test/*"})}};
}

void LabServiceTest::start_service(Json cfg) {
  svc_ = std::make_unique<ServiceProcess>(dir_ / "svc", std::move(cfg));
  ASSERT_TRUE(svc_->start()) << svc_->log_tail();
}

Json LabServiceTest::host_state(HttpClient& c, const std::string& name) {
  auto r = c.get("/healthz");
  if (r.status == 0) return Json();
  Json health = r.json();  // held: the loop reads inside it
  for (const auto& h : health["data"]["hosts"])
    if (h["name"] == name) return h;
  return Json();
}

bool LabServiceTest::wait_host(HttpClient& c, const std::string& name, const std::string& state,
                               int seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < until) {
    Json h = host_state(c, name);
    if (h.is_object() && h.value("state", std::string()) == state) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

std::vector<SoakHost> LabServiceTest::soak_hosts(int down) const {
  std::vector<SoakHost> hosts;
  for (size_t i = 0; i < lab_.engines.size(); ++i)
    hosts.push_back(
        {lab_.engines[i].name, static_cast<int>(i) == down ? nullptr : &*lab_.engines[i].client});
  return hosts;
}

}  // namespace gpulab::service::testing
