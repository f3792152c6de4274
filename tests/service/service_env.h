// Shared set-up for the tests that run `gpulab serve` against a real dockerd (the harness in
// tests/support): the engine, the test images the service tests need, and a service per test.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "docker/client.h"
#include "http_client.h"
#include "service/base/config.h"
#include "service_process.h"
#include "support/docker_fixture.h"

namespace gpulab::service::testing {

// FROM gpulab-test/busybox with a long-running command (so stats and exec work).
inline constexpr const char* kBoxImage = "gpulab-test/service-box:latest";
// FROM gpulab-test/debian-ssh with the lab entrypoint (images/common/entrypoint.sh) that applies
// the password file (docker::kLabSshPasswordFile) / GPULAB_SSH_PUBKEY and starts sshd.
inline constexpr const char* kSshImage = "gpulab-test/service-ssh:latest";

// Builds kBoxImage (and kSshImage when with_ssh) on the engine if absent.
Status ensure_service_images(const docker::Client& client, bool with_ssh);

using gpulab::testing::unique_port_base;

// Four declared NVIDIA GPUs without devices (no GPU on CI), allowlist of the test images.
Json four_gpu_config(const std::string& docker_host, int port_base);

class ServiceTest : public ::testing::Test {
 protected:
  // The config of a Service opened in this process (open_service) on the test engine: its book
  // and backups in dir_, a port block of its own, no GPU devices, the test images allowed.
  ServiceConfig in_process_config() const;
  // Starts the main engine (or skips), the images, and one service with `config`.
  void start_service(Json config, bool with_ssh = false);
  void SetUp() override;
  void TearDown() override;
  // Containers on the engine labeled as managed by the service of this test (by owner label).
  int engine_managed_count(const std::string& name_prefix);

  std::optional<gpulab::testing::TestEngine> engine_;
  std::optional<docker::Client> client_;
  std::filesystem::path dir_;
  std::unique_ptr<ServiceProcess> svc_;
  std::string prefix_;  // container names of this test start with it
};

// gpulab_reconcile_passes_total from the service's /metrics; -1 when absent. A test that must
// see a reconcile pass run after a change waits for this to grow by 2 (the first may have begun
// before the change).
long reconcile_passes(HttpClient& c);

// gpulab_event_watchers_started_total: hosts whose engine events the service follows (from that
// moment, none is missed); -1 when absent.
long event_watchers_started(HttpClient& c);

// One create phase's histogram (gpulab_create_phase_seconds{phase}): creates timed, seconds summed.
struct CreatePhase {
  double count = 0;
  double seconds = 0;
};

// Every create phase ("check", "place", "engine", "book") in the /metrics text `metrics`.
std::map<std::string, CreatePhase> create_phases(const std::string& metrics);

}  // namespace gpulab::service::testing
