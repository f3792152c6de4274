// Create / start / stop / delete / update against the engine, with the book kept in step.
#include "service/ops/containers/container_ops.h"

#include "core/log.h"
#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/base/crypto.h"
#include "service/domain/validation.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/containers/engine_container.h"
#include "service/ops/containers/recreate.h"
#include "service/ops/containers/refused_port.h"
#include "service/ops/containers/unbooked.h"
#include "service/ops/hosts/host_fanout.h"
#include "service/ops/images/internal_images.h"
#include "service/ops/policies/quota.h"
#include "service/ops/policies/usage_meter.h"

namespace gpulab::service {

namespace {

// Whether a create may run `image` at all (no engine asked): not internal, in the allowlist.
void check_image_allowed(Service& s, const std::string& image, bool internal) {
  if (internal) return;
  if (is_internal_image(image))
    throw ApiError(ApiCode::kImageNotAllowed, "Image '" + image + "' is internal to the service",
                   "use restore-snapshot or restore");
  if (!image_allowed(image, s.config.image_allowlist))
    throw ApiError(ApiCode::kImageNotAllowed, "Image '" + image + "' is not in the allowlist",
                   "allowed: " + join(s.config.image_allowlist, ", "));
}

// A new container's name: an object name (check_name) of two characters or more, as Docker's
// rule ([a-zA-Z0-9][a-zA-Z0-9_.-]+) needs; refused here rather than by the engine after booking.
void check_container_name(const std::string& name) {
  check_name(name, "container name");
  if (name.size() < 2)
    throw ApiError(ApiCode::kInvalidRequest, "Invalid container name '" + name + "'",
                   "use 2-64 letters, digits, '_', '.', '-', starting with a letter or digit");
}

// `with_image`: the hosts that hold the image (hosts_with_image); none: the create is refused.
void require_image_somewhere(Service& s, const std::string& image,
                             const std::vector<Host*>& with_image, const std::string& host) {
  if (!with_image.empty()) return;
  // A host that hung on the question was marked so meanwhile: its 503, not "no such image"; so
  // is the one engine of a lab without hosts that never answered.
  if (!host.empty()) (void)s.engine_on(host);
  if (s.hosts.size() <= 1) (void)s.engine();
  throw ApiError(ApiCode::kImageNotAllowed, "Image '" + image + "' is not on the engine",
                 "the service never pulls; build or load the image on this host first");
}

// What the exception being handled says (called inside a catch block).
std::string current_error_message() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception of an unknown type";
  }
}

// Removes what a failed create may have left on the engine; says so in the log if it cannot
// (the reconciler and the next create of that name remove it later).
void remove_leftover(Service& s, const std::string& host, const std::string& name) {
  auto st = s.engine_on(host).remove_container(name);
  if (!st && st.error().code != Code::kNotFound)
    spdlog::error("removing the half-created container {}: {}", name, st.error().to_string());
}

// The name is free unless the engine holds a container of that name outside the book. One this
// book made (a create whose clean-up did not finish, or one the engine finished after a crash
// rolled its row back) is removed, as the reconciler would; anything else blocks the name.
void free_engine_name(Service& s, const std::string& name) {
  // Every host at once, within host_answer_seconds; one that does not answer in time is not
  // placed on (hosts_with_image), and a create naming it meets the engine's own name check.
  auto got = ask_hosts<Result<EngineContainer>>(
      s, [name](const Host&, const Engine& e) { return e.inspect_container(name); });
  for (const auto& h : s.hosts) {
    auto it = got.answers.find(h->name());
    if (it == got.answers.end() || !it->second) continue;  // not there (or the engine is down)
    const Engine* e = h->engine();
    const EngineContainer* info = &*it->second;
    if (remove_unbooked_container(s, *e, name, info->id, info->labels)) {
      spdlog::warn("removed {} on {}: this service made it but had no row for it", name, h->name());
      continue;
    }
    throw ApiError(
        ApiCode::kNameConflict,
        "A container named '" + name + "' exists on host '" + h->name() + "', outside this service",
        "choose another name, or ask the host's admin to remove it (docker rm)");
  }
}

// A failed create's engine container and row go; nothing was given out, so its ports go back
// without resting. `final`: the failure is the create's answer (audited and logged); else the
// create tries again. Called inside the catch block.
void undo_create(Service& s, const CreateOptions& o, const Allocation& a, bool final) {
  std::string why = current_error_message();
  try {
    remove_leftover(s, a.host, o.name);
  } catch (const ApiError&) {  // its host went down meanwhile: the reconciler removes it
  }
  s.store->remove_container(a.id, false);
  if (!final) return;
  s.store->audit(o.owner, "create", o.name, "failed", why);
  spdlog::warn("create {} for {} failed: {}", o.name, o.owner, why);
}

}  // namespace

CreateOutcome create_container(Service& s, const CreateOptions& o) {
  // Where a create's time goes (gpulab_create_phase_seconds{phase}): the checks that ask the
  // engines, placement and booking, the engine's create + start, the final book write. The
  // scaling figures in docs/engines.md come from it.
  PhaseTimer phases(s.metrics, "create_phase", "phase");
  check_container_name(o.name);
  check_image_allowed(s, o.spec.image, o.internal_image);
  // Each host asked about the image once; the asked host resolved once, here.
  const std::vector<Host*> with_image = hosts_with_image(s, o);
  require_image_somewhere(s, o.spec.image, with_image, o.host);
  auto lock = s.lock_container(o.name);
  if (!s.store->find_container(o.name)) free_engine_name(s, o.name);
  phases.lap("check");
  CreateOutcome out;
  out.ssh_password = o.spec.ssh_public_key.empty() ? random_secret(20) : std::string();
  Allocation a;
  for (int attempt = 1;; ++attempt) {
    a = allocate(s, o, state::kCreating, true, &with_image);
    phases.lap("place");
    try {
      auto cs = engine_spec(s, o.name, o.owner, o.spec, a.gpus, a.ssh_port, a.id);
      std::string id = engine_create_start(s, a.host, cs, out.ssh_password);
      phases.lap("engine");
      s.store->transaction([&] {
        s.store->set_docker_id(a.id, id);
        s.store->set_state(a.id, state::kRunning);
      });
      phases.lap("book");
      break;
    } catch (const ApiError& e) {
      const bool refused =
          e.api_code() == ApiCode::kPortConflict && names_port(e.error().message, a.ssh_port);
      const bool retry = refused && attempt < kSshPortTries;
      undo_create(s, o, a, !retry);
      // The last one too: a retry (or the next create) skips it.
      if (refused) hold_back_refused_ssh_port(s, a.host, a.ssh_port);
      if (!retry) throw;
    } catch (...) {
      undo_create(s, o, a, true);
      throw;
    }
  }
  s.store->audit(o.owner, "create", o.name, "ok",
                 "host=" + a.host + " gpus=" + std::to_string(a.gpus.size()) +
                     " ssh_port=" + std::to_string(a.ssh_port));
  out.record = *s.store->find_container(a.id);
  return out;
}

CreateOptions restore_options(const Principal& who, const Json& req, ContainerSpec recorded,
                              const std::string& image) {
  CreateOptions o;
  o.name = req["name"].get<std::string>();
  o.owner = who.user;
  recorded.ports.clear();
  o.spec = apply_spec_fields(req, std::move(recorded));
  o.spec.run_from(image);
  o.internal_image = true;
  o.host = req.value("host", std::string());  // a backup restore may name its host
  return o;
}

ContainerRecord require_container(Service& s, const Principal& who, const std::string& name) {
  check_name(name, "container name");
  auto c = s.store->find_container(name);
  if (!c) throw ApiError(ApiCode::kContainerNotFound, "Container '" + name + "' not found");
  require_owner(who, c->owner, "Container '" + name + "'");
  if (c->state == state::kLeased)
    throw ApiError(ApiCode::kStateConflict, "'" + name + "' is a GPU lease, not a container",
                   "see /api/v1/gpu-docker/leases; release it there once its container is gone");
  if (c->state == state::kMoving)
    throw ApiError(ApiCode::kStateConflict,
                   "Container '" + name + "' is being moved to another host",
                   "try again once the move has ended (GET /api/v1/gpu-docker/list shows it)");
  return *c;
}

namespace {

// The host port of `c` that the engine's refusal `why` names, as a user reads it: "its SSH port
// 20222", "host port 8080"; empty when it names none of them.
std::string refused_port_of(const ContainerRecord& c, const std::string& why) {
  if (names_port(why, c.ssh_port)) return "its SSH port " + std::to_string(c.ssh_port);
  for (const auto& p : c.spec.ports)
    if (names_port(why, p.host_port)) return "host port " + std::to_string(p.host_port);
  return {};
}

// A start or restart of `c` the engine refused with `e`. Its SSH port (the service's choice)
// taken on its host meanwhile: held back, the container made again there from a commit of itself
// on a new one, and started (returns). A user's own port taken: PORT_CONFLICT naming it, the
// container left stopped. Anything else: the engine's error.
void start_refused(Service& s, const ContainerRecord& c, const Engine& engine, const Error& e) {
  try {
    throw_engine_error(e);
  } catch (const ApiError& refusal) {
    const std::string port = refused_port_of(c, e.message);
    if (refusal.api_code() != ApiCode::kPortConflict || port.empty()) throw;
    if (names_port(e.message, c.ssh_port) && engine.archives()) {
      hold_back_refused_ssh_port(s, c.host, c.ssh_port);
      recreate_container(s, c, engine, c.spec, RecreateChange{.ssh_port = true});
      return;
    }
    const std::string where = s.hosts.size() > 1 ? " on host '" + c.host + "'" : "";
    std::string hint = "free that port there, or delete the container and create it again";
    if (!engine.archives()) hint += " (this host's engine keeps no commits to move it with)";
    throw ApiError(ApiCode::kPortConflict,
                   "Container '" + c.name + "' cannot start: " + port + where +
                       " is taken outside this service (" + e.message + ")",
                   hint);
  }
}

}  // namespace

void start_container(Service& s, const ContainerRecord& c) {
  const Engine& engine = s.engine_of(c);
  auto st = engine.start_container(c.engine_ref());
  if (!st) return start_refused(s, c, engine, st.error());  // returns started on a new SSH port
  s.store->set_state(c.id, state::kRunning);
}

void stop_container(Service& s, const ContainerRecord& c) {
  auto st = s.engine_of(c).stop_container(c.engine_ref(), s.config.stop_timeout_seconds);
  if (!st) throw_engine_error(st.error());
  s.store->set_state(c.id, state::kExited);
}

void restart_container(Service& s, const ContainerRecord& c) {
  const Engine& engine = s.engine_of(c);
  auto st = engine.restart_container(c.engine_ref(), s.config.stop_timeout_seconds);
  if (!st) return start_refused(s, c, engine, st.error());  // a stopped one's port, as in start
  s.store->set_state(c.id, state::kRunning);
}

void delete_container(Service& s, const ContainerRecord& c) {
  // Its host first: one that is down refuses (503) before the book says anything.
  const Engine& engine = s.engine_of(c);
  s.store->set_state(c.id, state::kDeleting);  // intent: a crash mid-way is finished at restart
  meter_tick(*s.store, s.clock->now());        // charge its GPUs up to their release
  auto st = engine.remove_container(c.engine_ref());
  if (!st && st.error().code != Code::kNotFound) {
    // Refused: the row as it was, so the reconciler never finishes a delete the API refused.
    // Had the engine removed it after all, the reconciler releases the row as gone.
    s.store->set_state(c.id, c.state);
    throw_engine_error(st.error());
  }
  s.store->remove_container(c.id, true);
  release_internal_image(s, c.spec.image);  // a restored backup's or a recreate's image
}

ContainerRecord update_resources(Service& s, const ContainerRecord& c, const Json& req) {
  // Its host first: one that is down refuses (503) before the book changes.
  const Engine& engine = s.engine_of(c);
  ContainerSpec spec = apply_spec_fields(req, c.spec);
  // A GPU count change recreates from a commit: refused before the book changes where the
  // engine keeps none (recreate_container relies on this).
  if (req.contains("gpu_count") && spec.gpu_count != c.spec.gpu_count)
    (void)require_archives(engine, "a GPU count change");
  ResourceChange u;
  bool engine_update = false;
  if (req.contains("cpus")) {
    u.nano_cpus = spec.cpus.nano_cpus;
    engine_update = true;
  }
  if (req.contains("memory")) {
    u.memory_bytes = spec.memory.bytes;
    u.memory_swap_bytes = spec.memory.bytes * 2;  // the engine's default ratio at create
    engine_update = true;
  }
  if (req.contains("pids_limit")) {
    u.pids_limit = spec.pids_limit;
    engine_update = true;
  }
  {
    // Checked and booked in one step: two updates of one user cannot both pass the quota.
    std::lock_guard<std::mutex> lock(s.alloc_mu);
    s.store->transaction([&] {
      check_quota(s, c.owner, spec, false, c.id);
      // gpu_count is booked below with the GPUs themselves, never ahead of them.
      ContainerSpec now = spec;
      now.gpu_count = c.spec.gpu_count;
      s.store->set_spec(c.id, now);
    });
  }
  if (engine_update) {
    auto st = engine.update_container(c.engine_ref(), u);
    if (!st) {
      s.store->set_spec(c.id, c.spec);
      throw_engine_error(st.error());
    }
  }
  if (req.contains("gpu_count") && spec.gpu_count != c.spec.gpu_count)
    recreate_container(s, c, engine, spec, RecreateChange{.gpus = true});
  return *s.store->find_container(c.id);
}

std::map<std::string, EngineContainer> engine_containers(
    Service& s, std::map<std::string, std::string>* host_of,
    std::map<std::string, std::string>* missed, const std::set<std::string>* only) {
  // A host that is down lists nothing (its rows show as unreachable: container_json); one that
  // does not answer in time is left out, and `missed` says so.
  if (s.hosts.size() == 1) (void)s.engine();  // not connected: ENGINE_UNAVAILABLE, as before
  auto got = ask_hosts<Result<std::vector<EngineContainer>>>(
      s, [](const Host&, const Engine& e) { return e.list_containers({"gpulab.managed=true"}); },
      only);
  std::map<std::string, EngineContainer> m;
  for (auto& [host, list] : got.answers) {
    if (!list) {
      if (s.hosts.size() == 1) throw_engine_error(list.error());  // its own error, as before
      got.missed[host] = list.error().message;
      continue;
    }
    for (auto& c : *list) {
      if (host_of) (*host_of)[c.name] = host;
      m[c.name] = c;
    }
  }
  if (missed) *missed = std::move(got.missed);
  return m;
}

Json container_json(const ContainerRecord& c, const EngineContainer* engine, const Host* host,
                    bool answered) {
  Json ports = Json::array();
  for (const auto& p : c.spec.ports) ports.push_back(p.to_string());
  Json j = {{"name", c.name},
            {"owner", c.owner},
            {"status", engine ? engine->state : (c.state == state::kRunning ? "missing" : c.state)},
            {"state", c.state},
            {"image", c.spec.shown_image()},
            {"ssh_port", c.ssh_port},
            {"gpu_devices", c.gpu_indices()},
            {"gpu_uuids", c.gpu_uuids()},
            {"port_mappings", ports},
            {"cpus", c.spec.cpus.text},
            {"memory", c.spec.memory.text},
            {"shm_size", c.spec.shm_size.text},
            {"pids_limit", c.spec.pids_limit},
            {"id", c.docker_id.substr(0, 12)},
            {"created_at", c.created_at}};
  if (engine) j["engine_status"] = engine->status;
  if (!c.spec.origin_image.empty()) j["engine_image"] = c.spec.image;  // a recreate's, a move's
  j["host"] = c.host;
  if (host) {
    if (!host->address().empty()) j["ssh_host"] = host->address();
    j["host_state"] = answered ? host->state() : "unresponsive";
    if (j["host_state"] != "up") j["status"] = "unreachable";  // its GPUs and ports stay booked
  } else if (!c.host.empty()) {
    j["host_state"] = "not configured";  // the host left the config; the book keeps the row
    j["status"] = "unreachable";
  }
  return j;
}

}  // namespace gpulab::service
