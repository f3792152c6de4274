// Typed requests and answers of the Docker Engine API subset gpulab uses (containers, exec,
// images, events). Sizes are in bytes, CPU in nano-CPUs, times as the engine's strings.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace gpulab::docker {

// ---- engine ----

struct VersionInfo {
  std::string version;          // "20.10.24+dfsg1"
  std::string api_version;      // the server's newest API, "1.41"
  std::string min_api_version;  // "1.12"
  std::string os, arch, kernel_version;
};

struct EngineInfo {
  std::string id, name, server_version;
  std::string storage_driver, cgroup_driver, cgroup_version, docker_root_dir;
  std::string operating_system, kernel_version;
  int containers = 0, containers_running = 0, images = 0, ncpu = 0;
  std::int64_t mem_total_bytes = 0;
  std::vector<std::string> runtimes;  // "runc", "nvidia" (NVIDIA Container Toolkit registered)
  Json raw;                           // the whole /info answer
};

// Where a lab container's SSH password is put before its first start (Client::put_file): the
// lab entrypoint (images/common/entrypoint.sh) applies it and deletes the file. Unlike an
// environment variable, it never shows in the engine's inspect output.
inline constexpr const char* kLabSshPasswordFile = "/run/gpulab/ssh_password";

// ---- container creation ----
//
// CreateSpec deliberately has NO field for Privileged, Binds/Mounts/Volumes, CapAdd,
// SecurityOpt, NetworkMode, PidMode/IpcMode/UsernsMode or Sysctls. Containers are handed to
// untrusted users over the REST API: each of those would give them the host (a bind of /, the
// host network, all capabilities). Leaving the fields out makes that impossible to express, not
// just checked. GPUs come in only through `gpus` (NVIDIA device requests) and `devices` (AMD
// /dev/kfd + one /dev/dri/renderD*), which expose the chosen devices and nothing else.

struct PortBinding {
  int container_port = 0;           // 1..65535
  std::string protocol = "tcp";     // "tcp" or "udp"
  int host_port = 0;                // 0: the engine picks a free one
  std::string host_ip = "0.0.0.0";  // or "127.0.0.1", a host address
};

// NVIDIA GPUs through the engine's device requests (needs NVIDIA Container Toolkit on the host).
struct GpuRequest {
  std::string driver = "nvidia";
  std::vector<std::string> device_ids;  // GPU UUIDs or indices ("GPU-6f3...", "0")
  int count = 0;                        // when device_ids is empty: that many; -1 = all
  std::vector<std::vector<std::string>> capabilities = {{"gpu"}};
};

// A host device node passed through (AMD: /dev/kfd and /dev/dri/renderD128).
struct DeviceMapping {
  std::string path_on_host;
  std::string path_in_container;  // empty: same as on the host
  std::string cgroup_permissions = "rwm";
};

struct RestartPolicy {
  std::string name = "no";  // "no", "always", "unless-stopped", "on-failure"
  int maximum_retry_count = 0;
};

struct CreateSpec {
  std::string name;   // empty: the engine makes one up
  std::string image;  // "repo:tag" or image id
  std::vector<std::string> cmd;
  std::optional<std::vector<std::string>> entrypoint;  // nullopt: image's; {} clears it
  std::vector<std::string> env;                        // "KEY=value"
  std::map<std::string, std::string> labels;
  std::string hostname, working_dir, user;
  bool tty = false;
  bool open_stdin = false;
  std::optional<int> stop_timeout_s;
  std::vector<PortBinding> ports;

  // HostConfig resources; 0 = no limit / engine default.
  std::int64_t nano_cpus = 0;  // 2 CPUs = 2'000'000'000
  std::int64_t memory_bytes = 0;
  std::int64_t shm_size_bytes = 0;  // /dev/shm (PyTorch DataLoader workers need more than 64 MiB)
  std::int64_t pids_limit = 0;
  std::vector<GpuRequest> gpus;
  std::vector<DeviceMapping> devices;
  std::vector<std::string> group_add;  // extra groups, e.g. "video", "render" (AMD)
  RestartPolicy restart_policy;
  bool init = false;         // run the engine's tiny init as PID 1 (reaps zombies)
  bool auto_remove = false;  // the engine removes the container once it stops (docker run --rm)

  // The POST /containers/create body.
  Json to_json() const;
};

// Host access for gpulab's own local commands run by the machine's operator (gpulab ddp: data
// and log folders, the host network for multi-node rendezvous). Deliberately a separate type,
// passed only to Client::create_container(spec, host): the REST service builds one only for its
// GPU probe (the admin's probe_root, read-only, for a container running the service's own
// script), so a remote user still cannot reach the host's files or network.
struct BindMount {
  std::string host_path;       // absolute, must exist on the engine's machine
  std::string container_path;  // absolute
  bool read_only = false;
};
struct HostAccess {
  std::vector<BindMount> mounts;
  bool host_network = false;  // share the host's network stack (published ports are then moot)
};

// Resource changes for a running container (POST /containers/{id}/update). Unset = unchanged.
struct ResourceUpdate {
  std::optional<std::int64_t> nano_cpus, memory_bytes, memory_swap_bytes, pids_limit;
  std::optional<RestartPolicy> restart_policy;
  Json to_json() const;
};

// ---- container state ----

struct PublishedPort {
  int container_port = 0;
  std::string protocol = "tcp";
  std::string host_ip;
  int host_port = 0;  // what the engine actually bound (0 while not running)
};

struct ContainerInfo {   // GET /containers/{id}/json
  std::string id, name;  // name without the leading "/"
  std::string image;     // as created ("busybox:latest")
  std::string image_id;  // "sha256:..."
  std::string status;    // "created", "running", "paused", "restarting", "exited", "dead"
  bool running = false;
  int exit_code = 0;
  int pid = 0;
  std::string created, started_at, finished_at, error;
  int restart_count = 0;
  bool tty = false;
  std::map<std::string, std::string> labels;
  std::vector<std::string> env, cmd;
  std::vector<PublishedPort> ports;  // bound ports when running, else the requested bindings
  std::string ip_address;            // on the default bridge
  std::int64_t nano_cpus = 0, memory_bytes = 0, shm_size_bytes = 0, pids_limit = 0;
  std::vector<GpuRequest> gpus;
  std::vector<DeviceMapping> devices;
  RestartPolicy restart_policy;
  Json raw;
};

struct ContainerSummary {                                // GET /containers/json
  std::string id, name, image, image_id, state, status;  // status: "Up 2 minutes"
  std::int64_t created = 0;                              // unix seconds
  std::map<std::string, std::string> labels;
  std::vector<PublishedPort> ports;
};

struct ListOptions {
  bool all = true;                  // include stopped containers
  std::vector<std::string> labels;  // "key" or "key=value"; all must match
  std::vector<std::string> names;   // name filters (engine matches substrings/regex)
  std::vector<std::string> ids;
  std::vector<std::string> statuses;  // "running", "exited", ...
};

struct LogOptions {
  bool stdout_ = true;
  bool stderr_ = true;
  int tail = -1;  // last N lines; -1 = all
  bool timestamps = false;
  std::int64_t since = 0;  // unix seconds; 0 = from the start
  bool follow = false;     // only for logs_stream
};

struct LogOutput {
  std::string out, err;
};

struct ContainerStats {    // one sample, computed like `docker stats` does
  double cpu_percent = 0;  // 100 = one full core
  int online_cpus = 0;
  std::int64_t memory_usage_bytes = 0;  // usage minus page cache, as `docker stats`
  std::int64_t memory_limit_bytes = 0;
  double memory_percent = 0;
  std::int64_t net_rx_bytes = 0, net_tx_bytes = 0;
  std::int64_t block_read_bytes = 0, block_write_bytes = 0;
  std::int64_t pids = 0;
  std::string read;  // sample time
  Json raw;
};

// ---- exec ----

struct ExecSpec {
  std::vector<std::string> cmd;
  std::vector<std::string> env;
  std::string user, working_dir;
  bool tty = false;
  // Stdin is not attached: exec is for running a command and reading its result.
};

struct ExecInspect {
  std::string id;
  bool running = false;
  int exit_code = 0;  // valid once !running
  int pid = 0;
};

struct ExecResult {
  int exit_code = -1;
  std::string out, err;
};

// ---- commit / images ----

struct CommitSpec {
  std::string repo, tag;  // new image "repo:tag"; empty repo = untagged
  std::string comment, author;
  std::map<std::string, std::string> labels;  // set on the new image's config
  std::vector<std::string> changes;           // Dockerfile instructions: "ENV A=b", "CMD [...]"
  bool pause = true;                          // pause the container while committing
};

struct ImageSummary {  // GET /images/json
  std::string id;
  std::vector<std::string> repo_tags;
  std::int64_t created = 0;  // unix seconds
  std::int64_t size_bytes = 0;
  std::map<std::string, std::string> labels;
};

struct ImageInfo {  // GET /images/{name}/json
  std::string id;
  std::vector<std::string> repo_tags;
  std::string created, comment, author, os, architecture;
  std::int64_t size_bytes = 0;
  std::map<std::string, std::string> labels;
  std::vector<std::string> env, cmd, entrypoint, exposed_ports;  // exposed: "22/tcp"
  Json raw;
};

struct ImageListOptions {
  bool all = false;
  std::vector<std::string> labels;     // "key" or "key=value"
  std::vector<std::string> reference;  // "gpulab-snap/*", "busybox:latest"
  bool dangling_only = false;
};

// One line of progress from build, load, import (the engine's JSON message stream).
struct Progress {
  std::string stream;  // text output ("Step 1/3 : FROM scratch\n")
  std::string status;  // "Loading layer", ...
  std::string id;
  std::string error;  // non-empty: the operation failed with this (errorDetail.message)
  Json raw;
};
using ProgressFn = std::function<void(const Progress&)>;

struct BuildSpec {
  std::filesystem::path context_tar;      // a tar (ustar, see tar.h) with the Dockerfile inside
  std::string dockerfile = "Dockerfile";  // path inside the context
  std::vector<std::string> tags;          // "repo:tag"
  std::map<std::string, std::string> build_args, labels;
  bool no_cache = false;
  bool pull = false;  // no registry reachable in CI: keep false
  bool remove_intermediate = true;
  std::string network_mode;  // build-time network ("" = default bridge)
  std::string target;        // multi-stage target
  std::int64_t memory_bytes = 0;
  std::int64_t shm_size_bytes = 0;
};

struct ImportSpec {
  std::filesystem::path rootfs_tar;  // a root filesystem tar
  std::string repo, tag;
  std::string message;
  std::vector<std::string> changes;  // "CMD [\"/bin/sh\"]", "ENV PATH=/bin", "EXPOSE 22"
  std::string platform;              // "" = engine default
};

// ---- events ----

struct EventFilter {
  std::vector<std::string> types;       // "container", "image", ...
  std::vector<std::string> containers;  // ids or names
  std::vector<std::string> events;      // "start", "die", ...
  std::vector<std::string> labels;      // "key" or "key=value"
  std::int64_t since = 0, until = 0;    // unix seconds; 0 = not set (until=0: stream forever)
};

struct Event {
  std::string type, action;  // "container", "start"
  std::string actor_id;
  std::map<std::string, std::string> attributes;  // "name", "image", labels...
  std::int64_t time = 0;                          // unix seconds
  std::int64_t time_nano = 0;
  Json raw;
};

}  // namespace gpulab::docker
