// A lab host's connection and health: connect when it first answers, ping, record up/down, and
// find its GPUs through its engine when none are declared.
#include "service/ops/hosts/host.h"

#include "core/log.h"

namespace gpulab::service {

namespace {

// A host's GPUs before its engine answered: declared, detected on this machine (the local
// socket's host, when it is not probed), or none yet.
ServiceInventory first_inventory(const ServiceConfig& engine_config, bool probed) {
  if (!probed) return build_inventory(engine_config);
  ServiceInventory inv;
  inv.source = "none";
  inv.gpu_type = "none";
  inv.note = "its GPU probe has not found them yet (see /healthz hosts)";
  return inv;
}

}  // namespace

Host::Host(HostConfig config, const ServiceConfig& service, EngineOpener open)
    : config_(std::move(config)),
      open_(open ? std::move(open) : EngineOpener(open_host_engine)),
      engine_config_(service) {
  // The empty URL of a lab without hosts means $DOCKER_HOST or the local socket, as before.
  const auto url = parse_host_url(config_.url);
  local_ = !url || !url->tcp;
  if (url) url_host_ = url->host;
  engine_config_.docker_host = config_.url;
  engine_config_.gpus = config_.gpus;
  // Without declared GPUs, a probe through the engine finds them on the host itself.
  const std::string& image =
      config_.probe_image.empty() ? service.probe_image : config_.probe_image;
  if (config_.gpus.empty() && service.detect_gpus && !image.empty())
    probe_ = GpuProbe{image, config_.probe_root, service.probe_timeout_seconds, config_.name};
  probe_retry_seconds_ = service.probe_retry_seconds;
  // Else discovery looks at this machine: right only for the local socket's host.
  engine_config_.detect_gpus = service.detect_gpus && local_ && !probed();
  ServiceInventory inv = first_inventory(engine_config_, probed());
  if (inv.gpus.empty() && !probed() && !local_ && config_.gpus.empty())
    inv.note = "no GPUs declared and no probe_image to find them on the host";
  for (auto& g : inv.gpus) g.host = config_.name;
  inventory_ = std::make_shared<const ServiceInventory>(std::move(inv));
}

std::shared_ptr<const ServiceInventory> Host::inventory() const {
  if (const Engine* e = engine()) return e->gpus();
  return inventory_;
}

std::string Host::address() const {
  if (!config_.address.empty()) return config_.address;
  return url_host_;  // empty for a unix socket
}

std::string Host::down_reason() const {
  std::lock_guard<std::mutex> g(mu_);
  return up_ ? std::string() : down_reason_;
}

std::string Host::unresponsive_reason() const {
  std::lock_guard<std::mutex> g(mu_);
  return hung_ ? hung_reason_ : std::string();
}

void Host::mark_unresponsive(const std::string& why) {
  {
    std::lock_guard<std::mutex> g(mu_);
    hung_reason_ = why;
  }
  if (!hung_.exchange(true) && up_) {
    spdlog::warn("host {} is unresponsive (left out until its next ping answers): {}", config_.name,
                 why);
    abandon_stalled_calls();
  }
}

void Host::abandon_stalled_calls() const {
  // A call with no answer for as long as a ping may take is waiting on the hung engine.
  if (const Engine* e = engine())
    e->abandon_stalled_calls(std::chrono::seconds(engine_config_.host_answer_seconds));
}

std::optional<bool> Host::live_restore() const {
  std::lock_guard<std::mutex> g(mu_);
  return live_restore_;
}

void Host::note_live_restore(const Engine& e) {
  const auto lr = e.live_restore();
  {
    std::lock_guard<std::mutex> g(mu_);
    live_restore_ = lr;
  }
  if (lr && !*lr)
    spdlog::warn(
        "host {}: its Docker engine runs without live-restore: a restart of its dockerd stops "
        "its containers (set \"live-restore\": true in /etc/docker/daemon.json there, or "
        "restart_on_host_return in this config; docs/engines.md)",
        config_.name);
}

std::string Host::state() const {
  return !up() ? "down" : responsive() ? "up" : "unresponsive";
}

const Engine* Host::engine() const {
  std::lock_guard<std::mutex> g(mu_);
  return engine_.get();
}

void Host::set_down(const std::string& why) {
  {
    std::lock_guard<std::mutex> g(mu_);
    down_reason_ = why;
    up_ = false;
  }
  // Each failed ping, not only the first: a call that started just before still ends promptly.
  abandon_stalled_calls();
}

Status Host::connect() {
  if (engine()) return ok_status();
  // A call that finds the engine hung marks this host so at once, not at the next ping.
  auto e = open_(engine_config_, config_, *inventory_,
                 [this](const std::string& why) { mark_unresponsive(why); });
  if (!e) {
    set_down(e.error().message);
    return e.error();
  }
  const Engine* fresh = nullptr;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!engine_) engine_ = std::move(*e);
    fresh = engine_.get();
  }
  if (admit_)
    if (auto st = admit_(*this, *fresh); !st) {
      set_down(st.error().message);
      return st.error();
    }
  up_ = true;
  note_live_restore(*fresh);
  return ok_status();
}

bool Host::check(const std::function<void(const Engine&)>& returning) {
  const bool was = up_.load();
  // Only an engine that answered before: connect() marks a first answer up at once.
  const Engine* known = engine();
  Status st = known ? known->ping() : connect();
  if (st && !was && known && admit_) st = admit_(*this, *known);
  if (st && !was && returning && known) returning(*known);
  if (st) {
    std::lock_guard<std::mutex> g(mu_);
    up_ = true;
    if (hung_.exchange(false)) spdlog::info("host {} answers again", config_.name);
  } else {
    set_down(st.error().message);
  }
  const bool now = up_.load();
  if (known && now && !was) note_live_restore(*known);  // its dockerd may have restarted
  if (was != now) {
    if (now)
      spdlog::info("host {} is up again", config_.name);
    else
      spdlog::warn("host {} is down: {}", config_.name, st.error().message);
  }
  return was != now;
}

Host::ProbeState Host::probe_state() const {
  if (!probed()) return {};
  std::lock_guard<std::mutex> g(probe_mu_);
  if (!probe_tried_) return {"pending", {}};
  return {probe_ok_ ? "ok" : "failed", probe_error_};
}

bool Host::probe_if_due(bool returning) {
  const Engine* e = engine();
  if (!probed() || !e) return false;
  std::lock_guard<std::mutex> run(probe_run_mu_);
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> g(probe_mu_);
    const bool retry = !probe_ok_ && now - probe_at_ >= std::chrono::seconds(probe_retry_seconds_);
    if (probe_tried_ && !returning && !retry) return false;
  }
  // A probe must never take the service down: whatever it throws is its failure.
  auto found = [&]() -> Result<std::shared_ptr<const ServiceInventory>> {
    try {
      return e->probe_gpus(probe_);
    } catch (const std::exception& ex) {
      return Error(Code::kInternal, std::string("GPU probe: ") + ex.what());
    }
  }();
  bool same_failure = false;  // a retry that fails as before is not logged again as an error
  {
    std::lock_guard<std::mutex> g(probe_mu_);
    const std::string error = found ? std::string() : found.error().to_string();
    same_failure = probe_tried_ && !probe_ok_ && !found && error == probe_error_;
    probe_tried_ = true;
    probe_ok_ = found.ok();
    probe_error_ = error;
    probe_at_ = std::chrono::steady_clock::now();
  }
  if (!found) {
    spdlog::log(same_failure ? spdlog::level::debug : spdlog::level::err,
                "host {}: GPU probe failed (its GPUs stay as they were: {}): {}", config_.name,
                e->gpus()->gpus.size(), found.error().to_string());
  } else if ((*found)->gpus.empty()) {
    spdlog::warn("host {}: GPU probe of {} found no GPU: {}", config_.name, probe_.root,
                 (*found)->note);
  } else {
    spdlog::info("host {}: GPU probe found {} GPU(s) ({})", config_.name, (*found)->gpus.size(),
                 (*found)->gpu_type);
    return true;
  }
  return false;
}

}  // namespace gpulab::service
