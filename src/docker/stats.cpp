// One resource sample of a running container, with CPU %, memory, network and block I/O
// computed the way `docker stats` computes them (cgroup v1 and v2 answers).
#include "docker/client.h"
#include "docker/client_internal.h"

namespace gpulab::docker {

using detail::child;
using detail::num;

namespace detail {

ContainerStats parse_stats(Json j) {
  ContainerStats s;
  s.read = str(j, "read");
  const Json& cpu = child(j, "cpu_stats");
  const Json& pre = child(j, "precpu_stats");
  double cpu_delta = static_cast<double>(num(child(cpu, "cpu_usage"), "total_usage") -
                                         num(child(pre, "cpu_usage"), "total_usage"));
  double sys_delta =
      static_cast<double>(num(cpu, "system_cpu_usage") - num(pre, "system_cpu_usage"));
  s.online_cpus = static_cast<int>(num(cpu, "online_cpus"));
  if (s.online_cpus == 0) {
    const Json& per = child(child(cpu, "cpu_usage"), "percpu_usage");
    s.online_cpus = per.is_array() ? static_cast<int>(per.size()) : 1;
  }
  if (cpu_delta > 0 && sys_delta > 0) s.cpu_percent = cpu_delta / sys_delta * s.online_cpus * 100.0;

  const Json& mem = child(j, "memory_stats");
  const Json& ms = child(mem, "stats");
  std::int64_t usage = num(mem, "usage");
  // Page cache is reclaimable; `docker stats` leaves it out (v1: total_inactive_file, v2:
  // inactive_file).
  std::int64_t cache = num(ms, "total_inactive_file", num(ms, "inactive_file"));
  s.memory_usage_bytes = cache < usage ? usage - cache : usage;
  s.memory_limit_bytes = num(mem, "limit");
  if (s.memory_limit_bytes > 0)
    s.memory_percent = 100.0 * static_cast<double>(s.memory_usage_bytes) /
                       static_cast<double>(s.memory_limit_bytes);

  const Json& nets = child(j, "networks");
  if (nets.is_object())
    for (const auto& n : nets) {
      s.net_rx_bytes += num(n, "rx_bytes");
      s.net_tx_bytes += num(n, "tx_bytes");
    }
  for (const auto& e : child(child(j, "blkio_stats"), "io_service_bytes_recursive")) {
    std::string op = str(e, "op");
    if (op == "Read" || op == "read") s.block_read_bytes += num(e, "value");
    if (op == "Write" || op == "write") s.block_write_bytes += num(e, "value");
  }
  s.pids = num(child(j, "pids_stats"), "current");
  s.raw = std::move(j);
  return s;
}

}  // namespace detail

Result<ContainerStats> Client::stats(const std::string& id) const {
  HttpRequest r;
  r.target = path("/containers/" + url_encode(id) + "/stats?stream=0");
  r.timeout = std::chrono::seconds(30);
  auto j = detail::call_json(*transport_, r, "read stats of container " + id);
  if (!j.ok()) return j.error();
  return detail::parse_stats(std::move(*j));
}

}  // namespace gpulab::docker
