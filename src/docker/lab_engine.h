// The Docker engine adapter's lab-container calls: one Docker engine as gpulab's callers use it.
// The service's engine seam (service/engine/docker_engine.h translates its terms to these) and
// the local tools (gpulab ddp, gpulab image build) go through it, so the create / password /
// start / remove-on-failure sequence has one home and nobody else drives docker::Client
// (tests/service/layout_test.cpp holds src/ and apps/ to that).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "docker/client.h"

namespace gpulab::docker {

class LabEngine {
 public:
  explicit LabEngine(Client client) : client_(std::move(client)) {}
  // Connects to `endpoint` and pings it: kUnavailable when it does not answer.
  static Result<LabEngine> connect(const Endpoint& endpoint);

  std::string describe() const { return client_.describe(); }
  Status ping() const { return client_.ping(); }
  // The engine's stable ID (GET /info), what gpulab serve books a host's GPUs by.
  Result<std::string> engine_id() const;
  bool image_exists(const std::string& ref) const { return client_.image_exists(ref); }

  // Creates `spec`, puts a non-empty `ssh_password` in as the lab password file before the first
  // start (never in the environment: inspect would show it) and, with `start`, starts it. On any
  // failure nothing of it is left. `host` (mounts, host network) is for the trusted local tools
  // only: the service never passes one. Returns its id.
  Result<std::string> make_lab_container(const CreateSpec& spec, const std::string& ssh_password,
                                         bool start, const HostAccess& host = {}) const;
  // Removes it, stopping it first, with its anonymous volumes.
  Status remove(const std::string& ref) const { return client_.remove_container(ref, true); }
  // Containers carrying these labels ("key" or "key=value"); `all`: stopped ones too.
  Result<std::vector<ContainerSummary>> containers(const std::vector<std::string>& labels,
                                                   bool all) const;
  // Hands its output to `on_chunk` as it comes until it stops; then waits for its exit code.
  Result<int> follow_to_exit(const std::string& ref,
                             const std::function<void(std::string_view)>& on_chunk) const;
  // Builds an image from a tar context (the build's output to `progress`); its id.
  Result<std::string> build_image(const BuildSpec& spec, const ProgressFn& progress = {}) const {
    return client_.build_image(spec, progress);
  }

 private:
  Client client_;
};

}  // namespace gpulab::docker
