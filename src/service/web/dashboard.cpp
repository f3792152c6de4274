// The dashboard's sampler thread: GPU samples into the ring buffer and the event hub, and a
// fingerprint of the book's containers and images so open pages learn of changes within a second.
#include "service/web/dashboard.h"

#include <chrono>
#include <functional>

#include "core/log.h"
#include "gpu/detect.h"
#include "service/engine/inventory.h"

namespace gpulab::service {

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Samples from a captured tree (config.dashboard.gpu_sample_root): the declared GPUs of demos and
// tests get real recorded values, matched by uuid.
std::vector<GpuSample> sample_captured(const std::string& root) {
  gpu::DetectOptions opts;
  opts.root = root;
  opts.host_checks = false;
  opts.processes = false;
  std::vector<GpuSample> out;
  for (const auto& g : gpu::detect(opts).gpus) {
    GpuSample s;
    s.uuid = g.uuid.value_or("");
    s.utilization_percent = g.utilization_percent;
    s.temperature_c = g.temperature_c;
    s.memory_used_bytes = g.memory_used_bytes;
    s.memory_total_bytes = g.memory_total_bytes;
    s.power_mw = g.power_mw;
    out.push_back(std::move(s));
  }
  return out;
}

std::optional<double> as_double(const std::optional<std::uint64_t>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

}  // namespace

Dashboard::Dashboard(Service& s)
    : service(s),
      sessions(*s.store),
      history(static_cast<std::size_t>(s.config.dashboard.history_seconds /
                                       s.config.dashboard.sample_seconds)) {}

Dashboard::~Dashboard() {
  stop();
}

void Dashboard::start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      try {
        tick();
      } catch (const std::exception& e) {  // a failed sample must not end the service
        spdlog::warn("dashboard sampler: {}", e.what());
      }
      lock.lock();
      cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
    }
  });
}

void Dashboard::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Dashboard::sample_gpus_now() {
  const auto& cfg = service.config.dashboard;
  auto samples =
      cfg.gpu_sample_root.empty() ? service.sample_gpus() : sample_captured(cfg.gpu_sample_root);
  auto holders = service.store->gpu_holders();
  std::int64_t t = now_ms();
  Json gpus = Json::array();
  const ServiceInventory inventory = service.inventory();
  for (const auto& g : inventory.gpus) {
    GpuPoint p;
    p.t_ms = t;
    p.held = holders.count(g.uuid) > 0;
    for (const auto& s : samples) {
      if (s.uuid != g.uuid) continue;
      p.utilization_percent = s.utilization_percent;
      p.temperature_c = s.temperature_c;
      p.memory_used_bytes = as_double(s.memory_used_bytes);
      p.memory_total_bytes = as_double(s.memory_total_bytes);
      if (s.power_mw) p.power_w = static_cast<double>(*s.power_mw) / 1000.0;
    }
    history.add(g.uuid, p);
    Json one = history.columns(g.uuid, t - 1);
    one["uuid"] = g.uuid;
    one["index"] = g.index;
    one["host"] = g.host;
    gpus.push_back(one);
  }
  hub.publish("gpus", {{"gpus", gpus}});
}

void Dashboard::tick() {
  auto now = std::chrono::steady_clock::now();
  if (now >= next_sample_) {
    next_sample_ = now + std::chrono::seconds(service.config.dashboard.sample_seconds);
    sample_gpus_now();
  }
  // Only that something changed, not what: pages refetch through the API, which applies
  // ownership, so an event never shows one user another's containers.
  std::string c;
  for (const auto& r : service.store->containers())
    c += r.name + '\1' + r.state + '\1' + std::to_string(r.gpus.size()) + '\1' + r.updated_at +
         '\1' + r.host + '\2';  // a move changes the host
  for (const auto& h : service.hosts) c += h->name() + (h->up() ? "+" : "-");  // up/down shows
  std::size_t ch = std::hash<std::string>{}(c);
  if (ch != last_containers_) hub.publish("containers", Json::object());
  last_containers_ = ch;
  std::string i;
  for (const auto& s : service.store->snapshots()) i += s.name + '\1';
  for (const auto& b : service.store->backups())
    i += b.name + '\1' + b.state + '\1' + std::to_string(b.bytes_done) + '\2';
  std::size_t ih = std::hash<std::string>{}(i);
  if (ih != last_images_) hub.publish("images", Json::object());
  last_images_ = ih;
}

}  // namespace gpulab::service
