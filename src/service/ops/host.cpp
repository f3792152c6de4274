// A lab host's connection and health: connect when it first answers, ping, record up/down.
#include "service/ops/host.h"

#include "core/log.h"

namespace gpulab::service {

Host::Host(HostConfig config, const ServiceConfig& service)
    : config_(std::move(config)), engine_config_(service) {
  // The empty URL of a lab without hosts means $DOCKER_HOST or the local socket, as before.
  const auto url = parse_host_url(config_.url);
  local_ = !url || !url->tcp;
  if (url) url_host_ = url->host;
  engine_config_.docker_host = config_.url;
  engine_config_.gpus = config_.gpus;
  // Discovery looks at this machine: right only for the local socket's host.
  engine_config_.detect_gpus = service.detect_gpus && local_;
  inventory_ = build_inventory(engine_config_);
  for (auto& g : inventory_.gpus) g.host = config_.name;
}

std::string Host::address() const {
  if (!config_.address.empty()) return config_.address;
  return url_host_;  // empty for a unix socket
}

std::string Host::down_reason() const {
  std::lock_guard<std::mutex> g(mu_);
  return up_ ? std::string() : down_reason_;
}

const Engine* Host::engine() const {
  std::lock_guard<std::mutex> g(mu_);
  return engine_.get();
}

void Host::set_down(const std::string& why) {
  std::lock_guard<std::mutex> g(mu_);
  down_reason_ = why;
  up_ = false;
}

Status Host::connect() {
  if (engine()) return ok_status();
  auto e = open_host_engine(engine_config_, config_, inventory_);
  if (!e) {
    set_down(e.error().message);
    return e.error();
  }
  std::lock_guard<std::mutex> g(mu_);
  if (!engine_) engine_ = std::move(*e);
  up_ = true;
  return ok_status();
}

bool Host::check(const std::function<void(const Engine&)>& returning) {
  const bool was = up_.load();
  // Only an engine that answered before: connect() marks a first answer up at once.
  const Engine* known = engine();
  Status st = known ? known->ping() : connect();
  if (st && !was && returning && known) returning(*known);
  if (st) {
    std::lock_guard<std::mutex> g(mu_);
    up_ = true;
  } else {
    set_down(st.error().message);
  }
  const bool now = up_.load();
  if (was != now) {
    if (now)
      spdlog::info("host {} is up again", config_.name);
    else
      spdlog::warn("host {} is down: {}", config_.name, st.error().message);
  }
  return was != now;
}

}  // namespace gpulab::service
