// A test fixture with the three lab engines (lab_host_engines.h) and one `gpulab serve` over them
// (lab1: 2 GPUs, lab2: 4, lab3: 2, declared; mutual TLS): the soak at three hosts and the load
// measurement use it. Skips visibly where the engines cannot run.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "lab_host_engines.h"
#include "service_env.h"
#include "soak_support.h"

namespace gpulab::service::testing {

class LabServiceTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // pack, host_check_seconds 1, reconcile every 2 s, tokens required, the test images allowed.
  Json lab_config() const;
  void start_service(Json cfg);
  // The host's entry in /healthz ({"name", "state", ...}); null if absent.
  Json host_state(HttpClient& c, const std::string& name);
  // Polls /healthz until the host has `state`; false after `seconds`.
  bool wait_host(HttpClient& c, const std::string& name, const std::string& state, int seconds);
  // The hosts as the invariant check sees them; engine `down` (an index) has no client.
  std::vector<SoakHost> soak_hosts(int down = -1) const;

  LabHostEngines lab_;
  std::filesystem::path dir_;
  std::unique_ptr<ServiceProcess> svc_;
  std::string prefix_;  // container names of this test start with it
};

}  // namespace gpulab::service::testing
