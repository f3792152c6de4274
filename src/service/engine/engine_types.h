// What the service asks of a container engine and what it gets back, in the service's own terms
// (no engine's wire format): a lab container to run, a container or image as the engine sees it,
// a usage sample, logs, an exec's output, an engine event. docs/engines.md maps each to Docker
// and to Kubernetes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "service/base/config.h"
#include "service/domain/container_spec.h"

namespace gpulab::service {

// The label that ties an engine container to its GPU lease: gpulab.lease=<lease name> (gpulab ddp
// sets it on the container it makes).
inline constexpr const char* kLeaseLabel = "gpulab.lease";

// A lab container as the service wants it run: an image with SSH on `ssh_port` of the host, the
// user's ports, limits, exactly `gpus`, and nothing of the host (no mounts, no host network, no
// privileges: no field here can ask for them).
struct LabContainer {
  std::string name;  // also the hostname
  std::string image;
  std::vector<std::string> env;  // "KEY=value"; the engine adds GPU visibility variables
  std::map<std::string, std::string> labels;
  int ssh_port = 0;                // host port published for the container's port 22
  std::vector<PortMapping> ports;  // the user's published ports
  std::int64_t nano_cpus = 0, memory_bytes = 0, shm_size_bytes = 0, pids_limit = 0;  // 0: none
  std::vector<GpuSlot> gpus;  // from the engine's own inventory (Engine::gpus)
};

// A container as the engine reports it (a listing or one inspect).
struct EngineContainer {
  std::string id, name;  // name without any leading "/"
  std::string image;     // as created ("busybox:latest")
  std::string state;     // "created", "running", "paused", "restarting", "exited", "dead"
  std::string status;    // the engine's words: "Up 2 minutes"; empty from an inspect
  std::map<std::string, std::string> labels;
  // From an inspect: paths where the engine keeps storage of its own apart from the container's
  // filesystem (an image's VOLUME); a commit leaves their contents out.
  std::vector<std::string> volumes;
};

// Changes to a running container's limits; unset = unchanged.
struct ResourceChange {
  std::optional<std::int64_t> nano_cpus, memory_bytes, memory_swap_bytes, pids_limit;
};

struct LogQuery {
  int tail = -1;  // last N lines; -1: all
};

struct LogText {
  std::string out, err;
};

struct ExecOutput {
  int exit_code = -1;
  std::string out, err;
};

// One usage sample of a running container, computed as `docker stats` does.
struct ContainerUsage {
  double cpu_percent = 0;  // 100 = one full core
  int online_cpus = 0;
  std::int64_t memory_usage_bytes = 0, memory_limit_bytes = 0;
  double memory_percent = 0;
  std::int64_t net_rx_bytes = 0, net_tx_bytes = 0;
  std::int64_t block_read_bytes = 0, block_write_bytes = 0;
  std::int64_t pids = 0;
};

// A container's filesystem kept as an image "repo:tag", with labels on it.
struct ImageCommit {
  std::string repo, tag, comment, author;
  std::map<std::string, std::string> labels;
};

struct EngineImage {
  std::string id;
  std::vector<std::string> tags;  // "repo:tag"
  std::int64_t size_bytes = 0;
  std::map<std::string, std::string> labels;
};

// Changes to containers carrying all of `labels` ("key=value"), between since and until (unix s).
struct EventQuery {
  std::vector<std::string> labels;
  std::vector<std::string> actions;  // "die", "destroy", "start", "stop"
  std::int64_t since = 0, until = 0;
};

struct EngineEvent {
  std::string action;  // "die", ...
  std::string container_name;
};

// How a host's GPUs are found through its own engine: a short-lived container of `image` reads
// the kernel files gpulab's detection needs from the host's `root` (bound read-only) and hands
// them back as a tree; the service detects the GPUs in that tree (gpu_probe.h).
struct GpuProbe {
  std::string image;         // needs /bin/sh, cat and mkdir (busybox or a lab image)
  std::string root = "/";    // the host path read as the host's "/"
  int timeout_seconds = 30;  // the container's run and the tree's transfer, each
  std::string host;          // the name its GPUs carry (GpuSlot::host)
};

// What a GPU lease answer says (the engine adds how its container must attach the GPUs).
struct LeaseFacts {
  std::string name, owner, gpu_type, created_at;
  std::vector<int> gpu_indices;
  std::vector<std::string> gpu_uuids;
  int ssh_port = 0;
  std::optional<std::string> container;  // the engine container bound to it
  // Only right after the lease was made: the GPUs to attach, and how long the lease waits.
  std::optional<std::vector<GpuSlot>> attach;
  int grace_seconds = 0;
};

}  // namespace gpulab::service
