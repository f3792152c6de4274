// Real-dockerd harness for tests: starts (or reuses) a private Docker engine, builds the local
// test images, and gives tests a connected docker::Client or a GTEST_SKIP reason.
//
// How it works (see tests/integration/dockerd/README.md):
//  - Engines are started by tests/integration/dockerd/start-dockerd.sh <name>, each under
//    /tmp/gpulab-dockerd-<name>/ (data root, exec root, pid file, docker.sock, log) with its own
//    bridge gpulab-<name> ("main": gpulab-main, "peer": gpulab-peer) on a free 172.31.X.0/24: two
//    engines side by side play two machines (backup on one, restore on the other).
//  - If GPULAB_TEST_DOCKER_HOST is set ("unix:///run/docker.sock"), main_engine() uses that
//    engine instead of starting one (peer_engine() still starts its own).
//  - Under ctest, the dockerd_start / dockerd_stop fixture tests (tests/integration/dockerd.cmake)
//    start the engines once and stop them at the end; add `FIXTURES_REQUIRED dockerd` to your
//    test binary's properties. Run directly, a test binary starts what it needs and leaves the
//    engines running for the next run (stop them: tests/integration/dockerd/stop-dockerd.sh --all).
//  - Not root or no dockerd binary: Code::kUnsupported with the reason, and tests GTEST_SKIP
//    with it. An engine that should start here but fails: Code::kUnavailable (tests fail).
#pragma once

#include <filesystem>
#include <string>

#include "core/result.h"
#include "docker/client.h"

namespace gpulab::testing {

// Test images, built locally (no registry is reachable in CI).
inline constexpr const char* kBusyboxImage =
    "gpulab-test/busybox:latest";  // FROM scratch + static busybox
inline constexpr const char* kDebianSshImage =
    "gpulab-test/debian-ssh:latest";  // debootstrap bookworm minbase + openssh-server

struct TestEngine {
  std::string name;         // "main", "peer", or "external"
  std::string socket_path;  // /tmp/gpulab-dockerd-main/docker.sock
  std::string host;         // "unix:///tmp/gpulab-dockerd-main/docker.sock" (for DOCKER_HOST, -H)
  std::filesystem::path root;  // /tmp/gpulab-dockerd-main (empty for an external engine)
  bool external = false;
};

// The engine tests use; started on first call (takes a few seconds), then reused.
Result<TestEngine> main_engine();
// A second engine beside the first (own bridge gpulabbr1, data root, socket): "another machine".
Result<TestEngine> peer_engine();
// A client for an engine (API version negotiated).
Result<docker::Client> client_for(const TestEngine& engine);

// Builds gpulab-test/busybox:latest on that engine if absent (about a second).
Status ensure_busybox_image(const docker::Client& client);
// Imports gpulab-test/debian-ssh:latest if absent. The rootfs tar comes from a cache
// ($GPULAB_TEST_CACHE or /var/cache/gpulab-test/debian-ssh-rootfs.tar); built with debootstrap
// the first time (minutes, needs the Debian mirror from /etc/apt/sources.list*).
Status ensure_debian_ssh_image(const docker::Client& client);
// Path of the cached Debian rootfs tar (building it if needed).
Result<std::filesystem::path> debian_ssh_rootfs_tar();

// A block of 1100 host ports (7000-31199, below the ephemeral range) held by this process for its
// life: the SSH ports base+11, base+22, ... of its containers never meet another test's.
int unique_port_base();

// Force-removes a container when the test leaves its scope, whatever happened (an empty id: none).
struct ContainerCleanup {
  const docker::Client& client;
  std::string id;
  ~ContainerCleanup() {
    if (!id.empty()) (void)client.remove_container(id, /*force=*/true);
  }
};

// A unique, valid container/image name for a test: "gpulab-t-<prefix>-<pid>-<n>".
std::string unique_name(const std::string& prefix);

// Path of tests/integration/dockerd/<script>.
std::filesystem::path dockerd_script(const std::string& script);

}  // namespace gpulab::testing

// In a TEST body or SetUp: connects `var` to the main engine (with the busybox image present).
// Skips the test when this machine cannot run an engine (not root, no dockerd: Code::kUnsupported);
// fails it when an engine should run here but does not start.
#define GPULAB_REQUIRE_DOCKER(var)                                      \
  auto var##_engine_ = ::gpulab::testing::main_engine();                \
  if (!var##_engine_.ok()) {                                            \
    if (var##_engine_.error().code == ::gpulab::Code::kUnsupported)     \
      GTEST_SKIP() << var##_engine_.error().to_string();                \
    FAIL() << var##_engine_.error().to_string();                        \
  }                                                                     \
  auto var##_client_ = ::gpulab::testing::client_for(*var##_engine_);   \
  ASSERT_TRUE(var##_client_.ok()) << var##_client_.error().to_string(); \
  {                                                                     \
    auto st_ = ::gpulab::testing::ensure_busybox_image(*var##_client_); \
    if (!st_.ok() && st_.error().code == ::gpulab::Code::kUnsupported)  \
      GTEST_SKIP() << st_.error().to_string();                          \
    ASSERT_TRUE(st_.ok()) << st_.error().to_string();                   \
  }                                                                     \
  ::gpulab::docker::Client& var = *var##_client_
