// gpulab serve's settings: defaults, the JSON config file (strict: unknown keys are errors), and
// the declared GPU inventory used where discovery fails and in tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::service {

// A GPU the service may hand out. From src/gpu discovery, or declared in the config file.
struct GpuSlot {
  std::string uuid;
  int index = 0;
  std::string vendor;       // "nvidia" or "amd"
  std::string name;         // model name when known
  int numa_node = -1;       // -1: unknown
  std::vector<int> links;   // indices of GPUs with a direct link (NVLink, xGMI)
  std::string render_node;  // AMD: host path of the GPU's render node (/dev/dri/renderD128)
  std::string render_node_in_container;  // where it appears inside (default: same path)
  std::string host;  // the host (HostConfig::name) the GPU sits in; set when the config is read
};

// How allocated GPUs reach a container.
enum class DeviceMode {
  kMap,   // NVIDIA: DeviceRequests by UUID; AMD: /dev/kfd + the GPU's own render node
  kNone,  // bookkeeping, labels and visibility env only (declared fake GPUs, CI)
};

struct UserSeed {
  std::string name;
  bool admin = false;
  std::string token_sha256;  // hex; the token itself never sits in a file
};

// The dashboard's GPU history: one sample per GPU every sample_seconds, kept for history_seconds.
struct DashboardConfig {
  int sample_seconds = 5;
  int history_seconds = 3600;
  std::string gpu_sample_root;  // a captured GPU tree (gpulab detect --root) sampled instead
};

// One machine's Docker engine. Without a `hosts` list the service has one host, "local", made
// from docker_host and the top-level gpus (service.h: default_host).
struct HostConfig {
  std::string name;    // [a-z0-9-], unique: the "host" of requests and answers
  std::string url;     // "unix:///var/run/docker.sock" or "tcp://HOST:2376"
  std::string tls_ca;  // tcp: PEM files of Docker's mutual TLS (CA, client certificate, key)
  std::string tls_cert;
  std::string tls_key;
  // Optional: the CA the engine trusts for clients (dockerd --tlscacert); tls_cert is then
  // checked to be signed by it when the config is read.
  std::string tls_client_ca;
  bool insecure = false;  // tcp without TLS: allowed only so, with a warning in the log
  std::string address;    // where users reach its ports (SSH answer); default: the URL's host
  std::string bind_ip = "0.0.0.0";  // the host address its containers' ports are published on
  std::vector<GpuSlot> gpus;        // declared; none: found by its probe, or detected here
  // With no GPUs declared, a container of probe_image (empty: the service's) reads the host's
  // kernel files under probe_root, bound read-only, and the service detects its GPUs in them.
  std::string probe_image;
  std::string probe_root = "/";
};

// A host URL as the service reads it (the engine adapter parses it again for its client).
struct HostUrl {
  bool tcp = false;  // tcp://HOST:PORT; else unix:///PATH
  std::string host;  // tcp: non-empty
  int port = 0;      // tcp: 1..65535
};
// unix:///PATH or tcp://HOST:PORT; nullopt for anything else (an empty HOST, a bad PORT).
std::optional<HostUrl> parse_host_url(std::string_view url);

struct ServiceConfig {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 8000;
  std::string docker_host;  // empty: $DOCKER_HOST or unix:///var/run/docker.sock
  std::string db_path = "/var/lib/gpulab/service.db";
  std::string backup_dir = "/backups";
  int ssh_port_base = 2200;  // SSH ports are base+11, base+22, ... as in the seed
  int ssh_port_step = 11;
  int port_rest_seconds = 30;  // a released port waits this long before reuse
  bool auth_required = false;  // forced on when listening beyond loopback
  // HTTPS: PEM certificate (chain) and key; both or neither. Without them a listen beyond
  // loopback is refused unless insecure_http (tokens would cross the network in clear text).
  std::string tls_cert, tls_key;
  bool insecure_http = false;
  int auth_failures_before_throttle = 10;    // failed token checks per address before 429s
  std::vector<std::string> image_allowlist;  // glob patterns; empty: any image on the engine
  std::string allocation_policy = "pack";    // "pack" or "spread"
  std::vector<GpuSlot> gpus;                 // declared inventory (overrides discovery)
  bool detect_gpus = true;                   // use src/gpu discovery when none are declared
  // A host without declared GPUs is probed through its engine with this image (HostConfig has
  // its own); empty: the local socket's host is detected on this machine, a tcp host has none.
  std::string probe_image;
  int probe_timeout_seconds = 30;  // the probe container's run, and its tree's transfer
  int probe_retry_seconds = 60;    // a failed probe is tried again this long after
  DeviceMode device_mode = DeviceMode::kMap;
  std::string amd_kfd_path = "/dev/kfd";
  std::string amd_kfd_in_container = "/dev/kfd";
  uint64_t max_body_bytes = 1 << 20;       // JSON requests
  uint64_t max_upload_bytes = 1ull << 40;  // backup uploads (streamed to disk)
  int request_timeout_seconds = 30;        // reading a request
  int idle_timeout_seconds = 60;           // keep-alive connection with nothing to do
  int worker_threads = 16;                 // handlers run here, not on the I/O threads
  int stop_timeout_seconds = 10;
  int reconcile_interval_seconds = 5;
  int idle_check_interval_seconds = 60;  // GPU metering and idle reclaim (housekeeper.h)
  // A lease (gpulab ddp) whose container has not appeared after this long is released.
  int lease_grace_seconds = 120;
  std::vector<UserSeed> users;
  std::vector<HostConfig> hosts;  // empty: one host from docker_host and gpus
  int host_check_seconds = 2;     // how often each host's engine is pinged (down/up)
  // The most a host's engine may take to take a connection, answer a ping, or answer the
  // per-host questions of a request spanning hosts (list, placement); a hung engine is marked
  // down within host_check_seconds + host_answer_seconds.
  int host_answer_seconds = 2;
  // When a host's engine answers again after being down, start its containers the book has as
  // running that the engine stopped meanwhile (a dockerd restart without live-restore).
  bool restart_on_host_return = false;
  std::string ssh_user = "root";
  DashboardConfig dashboard;
};

// Reads a config file; a missing file, malformed JSON or an unknown key is an error.
Result<ServiceConfig> load_config(const std::string& path);
// Applies a JSON object onto defaults (used by load_config and tests).
Result<ServiceConfig> config_from_json(const std::string& text);
// Checks cross-field rules (device paths declared and present in map mode, ports in range, TLS
// files, no plain HTTP beyond loopback unless insecure_http).
Status validate_config(const ServiceConfig& config);
// The lab's hosts: config.hosts, or the one host "local" made from docker_host and gpus.
std::vector<HostConfig> lab_hosts(const ServiceConfig& config);
// A host's name as the config allows it: 1-32 of a-z, 0-9 and '-', not starting with '-'.
bool valid_host_name(const std::string& name);
// Parses "ADDR:PORT" (IPv6 as "[::1]:8000").
Status parse_listen(const std::string& text, ServiceConfig& config);
bool is_loopback_host(const std::string& host);

}  // namespace gpulab::service
