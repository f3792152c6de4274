// The Docker adapter's GPU probe: a short-lived container of the probe image, with the host's
// probe root bound read-only at /host, runs the probe script; its tree comes back through the
// container archive endpoint, and the container is removed whatever happened.
#include <algorithm>
#include <chrono>
#include <thread>

#include "core/random.h"
#include "core/strings.h"
#include "service/engine/docker_engine.h"
#include "service/engine/gpu_probe.h"

namespace gpulab::service {

namespace {

using Clock = std::chrono::steady_clock;

// The probe container as the engine gets it: the script as its command, nothing published, a
// few processes and a little memory, and the NVIDIA driver's tools when the engine has them.
docker::CreateSpec probe_spec(const GpuProbe& probe, bool nvidia_runtime) {
  docker::CreateSpec cs;
  cs.name = "gpulab-probe-" + to_lower(random_string(12));
  cs.image = probe.image;
  cs.entrypoint = std::vector<std::string>{"/bin/sh", "-c", gpu_probe_script()};
  cs.user = "0";  // the host's kernel files are for root to read; a lab image may set another
  cs.labels = {{"gpulab.probe", "true"}};
  cs.memory_bytes = 256LL << 20;
  cs.pids_limit = 64;
  if (nvidia_runtime) {
    // nvidia-smi and the driver's libraries come into the container with "utility".
    docker::GpuRequest all;
    all.count = -1;
    all.capabilities = {{"gpu", "utility"}};
    cs.gpus.push_back(all);
    cs.env.push_back("NVIDIA_DRIVER_CAPABILITIES=utility");
  }
  return cs;
}

// The last lines of a text, for an error message.
std::string tail_lines(const std::string& text, size_t n = 5) {
  auto lines = split(trim(text), '\n');
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - static_cast<long>(n));
  return join(lines, " | ");
}

// Waits until the container is no longer running; its exit code, or kTimeout at the deadline.
Result<int> wait_until_exit(const docker::Client& client, const std::string& id,
                            Clock::time_point deadline) {
  while (true) {
    auto info = client.inspect_container(id);
    if (!info) return info.error();
    if (!info->running && info->status != "created") return info->exit_code;
    if (Clock::now() >= deadline) return Error(Code::kTimeout, "still running");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// Probe containers a killed service left behind (the label says what they are). A running one
// may be another service's probe in progress on a shared engine: it is left to its owner.
void remove_stale_probes(const docker::Client& client) {
  docker::ListOptions lo;
  lo.all = true;
  lo.labels = {"gpulab.probe=true"};
  auto list = client.list_containers(lo);
  if (!list) return;
  for (const auto& c : *list)
    if (c.state != "running") (void)client.remove_container(c.id, true);
}

// Removes the probe container when the probe ends, however it ends.
struct RemoveOnExit {
  const docker::Client& client;
  std::string id;
  ~RemoveOnExit() { (void)client.remove_container(id, true); }
};

}  // namespace

Result<std::shared_ptr<const ServiceInventory>> DockerEngine::probe_gpus(
    const GpuProbe& probe) const {
  auto tar = run_probe(probe);
  if (!tar) return tar.error();
  auto found = inventory_from_probe(*tar, probe.host);
  if (!found) return found.error();
  auto shared = std::make_shared<const ServiceInventory>(std::move(*found));
  std::lock_guard<std::mutex> g(inventory_mu_);
  inventory_ = shared;
  return shared;
}

Result<std::string> DockerEngine::run_probe(const GpuProbe& probe) const {
  const std::string where = "GPU probe on " + client_.describe();
  if (!client_.image_exists(probe.image))
    return Error(Code::kNotFound, where + ": probe image " + probe.image + " is not on that engine",
                 "load it there (docker load, or gpulab image build on that host), or set the "
                 "host's probe_image to an image it has; it needs /bin/sh, cat, mkdir and rm");
  bool nvidia = false;
  if (auto info = client_.info())
    nvidia = std::count(info->runtimes.begin(), info->runtimes.end(), "nvidia") > 0;
  remove_stale_probes(client_);
  docker::HostAccess access;
  access.mounts.push_back({probe.root, kProbeHostMount, true});
  auto id = client_.create_container(probe_spec(probe, nvidia), access);
  if (!id)
    return Error(id.error().code, where + " (probe_root " + probe.root + "): " + id.error().message,
                 id.error().hint);
  RemoveOnExit remove{client_, *id};
  const auto deadline = Clock::now() + std::chrono::seconds(probe.timeout_seconds);
  if (auto st = client_.start_container(*id); !st)
    return Error(st.error().code, where + ": " + st.error().message, st.error().hint);
  auto code = wait_until_exit(client_, *id, deadline);
  if (!code)
    return Error(code.error().code, where + ": " + code.error().message +
                                        (code.error().code == Code::kTimeout
                                             ? " after " + std::to_string(probe.timeout_seconds) +
                                                   " s (probe_timeout_seconds)"
                                             : std::string()));
  auto out = client_.logs(*id);
  const std::string said = out ? tail_lines(out->out + "\n" + out->err) : std::string();
  if (*code != 0 || !out || trim(out->out).find(kProbeDoneLine) == std::string::npos)
    return Error(Code::kDataError,
                 where + ": the probe script did not finish (exit " + std::to_string(*code) +
                     (said.empty() ? std::string(")") : "): " + said),
                 "probe_image must run /bin/sh -c with cat, mkdir and rm");
  return fetch_probe_tree(*id, probe);
}

Result<std::string> DockerEngine::fetch_probe_tree(const std::string& id,
                                                   const GpuProbe& probe) const {
  const ProbeTreeLimits limits;
  std::string tar;
  bool too_big = false;
  auto st = client_.copy_from_container_to(
      id, kProbeTreeDir,
      [&](std::string_view chunk) {
        if (static_cast<std::int64_t>(tar.size() + chunk.size()) > limits.max_archive_bytes) {
          too_big = true;
          return false;
        }
        tar.append(chunk);
        return true;
      },
      std::chrono::seconds(probe.timeout_seconds));
  if (too_big)
    return Error(Code::kDataError, "GPU probe on " + client_.describe() + ": its tree is over " +
                                       std::to_string(limits.max_archive_bytes) + " bytes");
  if (!st)
    return Error(st.error().code, "GPU probe on " + client_.describe() + ": " + st.error().message,
                 st.error().hint);
  return tar;
}

}  // namespace gpulab::service
