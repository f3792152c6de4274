// The three-engine service fixture (lab_service_test.h).
#include "lab_service_test.h"

#include <thread>

#include "service/base/crypto.h"

namespace gpulab::service::testing {

void LabServiceTest::SetUp() {
  LabHostsTest::SetUp();
  prefix_ = "s" + random_secret(4);
}

Json LabServiceTest::lab_config() const {
  Json cfg = LabHostsTest::lab_config("pack");
  cfg["reconcile_interval_seconds"] = 2;
  cfg["auth_required"] = true;
  cfg["stop_timeout_seconds"] = 1;
  return cfg;
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
  for (size_t i = 0; i < engines_.size(); ++i)
    hosts.push_back(
        {engines_[i].name, static_cast<int>(i) == down ? nullptr : &*engines_[i].client});
  return hosts;
}

}  // namespace gpulab::service::testing
