// Idle detection per container and the warn -> stop sequence; see idle_reclaim.h.
#include "service/ops/policies/idle_reclaim.h"

#include <cmath>
#include <cstdio>

#include "core/log.h"
#include "service/base/api_error.h"
#include "service/ops/containers/container_ops.h"
#include "service/ops/containers/refused_port.h"
#include "service/ops/policies/policy_request.h"
#include "service/store/user_policy.h"

namespace gpulab::service {

namespace {

using FT = FieldType;

double number_in(const Json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

std::string minutes(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f min", seconds / 60);
  return buf;
}

}  // namespace

IdlePolicy IdlePolicy::from_json(const Json& j) {
  IdlePolicy p;
  p.enabled = j.value("enabled", p.enabled);
  p.utilization_percent = number_in(j, "utilization_percent", p.utilization_percent);
  p.idle_minutes = number_in(j, "idle_minutes", p.idle_minutes);
  p.warn_minutes = number_in(j, "warn_minutes", p.warn_minutes);
  p.network_bytes = static_cast<std::int64_t>(
      number_in(j, "network_bytes", static_cast<double>(p.network_bytes)));
  p.release_gpus = j.value("release_gpus", p.release_gpus);
  return p;
}

Json IdlePolicy::to_json() const {
  return {{"enabled", enabled},
          {"utilization_percent", utilization_percent},
          {"idle_minutes", idle_minutes},
          {"warn_minutes", warn_minutes},
          {"network_bytes", network_bytes},
          {"release_gpus", release_gpus}};
}

IdlePolicy idle_policy(Store& store, const std::string& user) {
  return IdlePolicy::from_json(effective_policy(store, PolicyKind::kIdle, user));
}

const RequestSchema& idle_policy_schema() {
  static const RequestSchema s{
      "IdlePolicyRequest",
      {{"user", FT::kString, true, "user name, or \"*\" for the default of everyone"},
       {"enabled", FT::kBoolean, false, "reclaim this user's idle containers (default false)"},
       {"utilization_percent", FT::kNumberOrString, false,
        "GPUs below this utilization are idle (default 5)"},
       {"idle_minutes", FT::kNumberOrString, false, "idle this long: warned (default 60)"},
       {"warn_minutes", FT::kNumberOrString, false,
        "still idle this long after the warning: stopped (default 15)"},
       {"network_bytes", FT::kInteger, false,
        "less traffic than this between two checks counts as none (default 65536)"},
       {"release_gpus", FT::kBoolean, false,
        "give the GPUs back when stopping (default false: it keeps GPUs and ports)"},
       {"reset", FT::kBoolean, false,
        "forget the user's own settings first (back to the default)"}}};
  return s;
}

Json set_idle_policy(Store& store, const Json& req) {
  const std::string user = policy_request_user(req);
  Json f = Json::object();
  for (const char* key : {"enabled", "release_gpus"})
    if (req.contains(key)) f[key] = req[key].get<bool>();
  if (req.contains("utilization_percent"))
    f["utilization_percent"] =
        policy_number(req["utilization_percent"], "utilization_percent", 0, 100);
  if (req.contains("idle_minutes"))
    f["idle_minutes"] = policy_number(req["idle_minutes"], "idle_minutes", 0, 525600);
  if (req.contains("warn_minutes"))
    f["warn_minutes"] = policy_number(req["warn_minutes"], "warn_minutes", 0, 525600);
  if (req.contains("network_bytes")) {
    auto n = req["network_bytes"].get<std::int64_t>();
    if (n < 0) throw ApiError(ApiCode::kInvalidRequest, "network_bytes must be >= 0");
    f["network_bytes"] = n;
  }
  return save_policy(store, PolicyKind::kIdle, user, f, req.value("reset", false));
}

bool IdleReclaimer::busy(const ContainerRecord& c, const IdlePolicy& p,
                         const std::vector<GpuSample>& samples, Watch& w, std::string& why) {
  for (const auto& g : c.gpus) {
    const GpuSample* smp = nullptr;
    for (const auto& x : samples)
      if (x.uuid == g.uuid) smp = &x;
    if (!smp || !smp->utilization_percent) {
      why = "no utilization sample for GPU " + std::to_string(g.index);
      return true;
    }
    if (*smp->utilization_percent >= p.utilization_percent) {
      why = "GPU " + std::to_string(g.index) + " busy";
      return true;
    }
  }
  // A host that is down cannot say: never reclaim on a guess.
  if (const Host* h = s_.find_host(c.host); !h || !s_.usable(*h)) {
    why = "host " + c.host + " is down";
    return true;
  }
  const Engine& engine = s_.engine_of(c);
  const std::string id = c.engine_ref();
  // One exec reads both: the engine's stats call would cost a second or more per container.
  auto ex = engine.exec(id, {"cat", "/proc/net/dev", "/proc/net/tcp", "/proc/net/tcp6"});
  std::optional<std::int64_t> bytes;
  if (ex) bytes = net_bytes_in(ex->out);
  if (!bytes) {  // an image without cat: the engine's stats count the same bytes
    if (auto st = engine.usage(id); st) bytes = st->net_rx_bytes + st->net_tx_bytes;
  }
  if (bytes) {
    bool traffic = w.net_bytes >= 0 && *bytes - w.net_bytes >= p.network_bytes;
    w.net_bytes = *bytes;
    if (traffic) {
      why = "network traffic";
      return true;
    }
  }
  if (ex && ssh_sessions_in(ex->out) > 0) {
    why = "SSH session";
    return true;
  }
  return false;
}

void IdleReclaimer::warn(const ContainerRecord& c, const IdlePolicy& p, double idle_s) {
  std::string line = "gpulab: this container has been idle for " + minutes(idle_s) +
                     " (GPUs below " + std::to_string(static_cast<int>(p.utilization_percent)) +
                     "%, no SSH session, no network traffic); it will be stopped in " +
                     minutes(p.warn_minutes * 60) + " unless it gets busy" +
                     (p.release_gpus ? ", and its GPUs given back" : "") + ".";
  const std::string id = c.engine_ref();
  // Appended with the container's own shell so the image's motd stays.
  auto ex = s_.engine_of(c).exec(id, {"sh", "-c", "echo \"$0\" >> /etc/motd", line});
  s_.store->audit("gpulab", "idle-warning", c.name, "ok",
                  "owner=" + c.owner + (ex && ex->exit_code == 0 ? "" : " (motd not written)"));
  s_.metrics.increment("idle_warnings");
}

void IdleReclaimer::reclaim(const ContainerRecord& listed, const IdlePolicy& p) {
  auto lock = s_.lock_container(listed.name);
  auto fresh = s_.store->find_container(listed.id);
  if (!fresh || fresh->state != state::kRunning) return;  // a request got there first
  stop_container(s_, *fresh);
  std::string detail = "owner=" + fresh->owner + " gpus=" + std::to_string(fresh->gpus.size());
  if (p.release_gpus && !fresh->gpus.empty()) {
    // Only a recreate takes GPUs out of an engine container; it comes back running, so stop it.
    const ContainerRecord after =
        update_resources(s_, *fresh, Json{{"name", fresh->name}, {"gpu_count", 0}});
    stop_container(s_, after);
    detail += " released (ask again with update-resources gpu_count=" +
              std::to_string(fresh->gpus.size()) + ")";
    if (after.ssh_port != fresh->ssh_port)  // the recreate found its SSH port taken meanwhile
      detail += "; " + ssh_port_change(fresh->ssh_port, after.ssh_port) + " (taken meanwhile)";
  }
  s_.store->audit("gpulab", "idle-stop", fresh->name, "ok", detail);
  s_.metrics.increment("idle_reclaims");
}

IdleReclaimer::Report IdleReclaimer::check(const std::vector<GpuSample>& samples) {
  Report r;
  const double now = s_.clock->now();
  std::map<std::int64_t, Watch> next;
  std::map<std::string, IdlePolicy> policies;
  for (const auto& c : s_.store->containers()) {
    if (c.state != state::kRunning || c.gpus.empty()) continue;
    auto pit = policies.find(c.owner);
    if (pit == policies.end())
      pit = policies.emplace(c.owner, idle_policy(*s_.store, c.owner)).first;
    const IdlePolicy& p = pit->second;
    if (!p.enabled) continue;
    ++r.checked;
    Watch w = watch_.count(c.id) ? watch_[c.id] : Watch{};
    std::string why;
    bool active = true;
    try {
      active = busy(c, p, samples, w, why);
    } catch (const Exception& e) {
      why = e.error().message;  // engine trouble: decide nothing this time
    }
    if (active) {
      w.idle_since = w.warned_at = -1;
      next[c.id] = w;
      continue;
    }
    ++r.idle;
    if (w.idle_since < 0) w.idle_since = now;
    try {
      if (w.warned_at < 0 && now - w.idle_since >= p.idle_minutes * 60) {
        warn(c, p, now - w.idle_since);
        w.warned_at = now;
        ++r.warned;
      }
      // Due one warning period after the idle time: the first check past it stops the container.
      if (w.warned_at >= 0 && now - w.idle_since >= (p.idle_minutes + p.warn_minutes) * 60) {
        reclaim(c, p);
        ++r.stopped;
        continue;  // no longer watched
      }
    } catch (const Exception& e) {
      spdlog::warn("idle reclaim of {}: {}", c.name, e.error().message);
    }
    next[c.id] = w;
  }
  watch_ = std::move(next);
  return r;
}

}  // namespace gpulab::service
