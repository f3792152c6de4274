// The soak's and the load measurement's fixture: the lab fixture (lab_hosts.h: three engines over
// mutual TLS, lab1 2 GPUs, lab2 4, lab3 2, declared) with tokens required, quick host checks and
// reconciles, per-test container names, and the hosts as the soak's invariant check sees them.
#pragma once

#include <string>
#include <vector>

#include "lab_hosts.h"
#include "soak_support.h"

namespace gpulab::service::testing {

class LabServiceTest : public LabHostsTest {
 protected:
  void SetUp() override;
  // pack, host_check_seconds 1, reconcile every 2 s, tokens required, the test images allowed.
  Json lab_config() const;
  void start_service(Json cfg) { start(std::move(cfg)); }
  // Polls /healthz until the host has `state`; false after `seconds`.
  bool wait_host(HttpClient& c, const std::string& name, const std::string& state, int seconds);
  // The hosts as the invariant check sees them; engine `down` (an index) has no client.
  std::vector<SoakHost> soak_hosts(int down = -1) const;

  std::string prefix_;  // container names of this test start with it
};

}  // namespace gpulab::service::testing
