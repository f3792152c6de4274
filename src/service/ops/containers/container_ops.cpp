// Create / start / stop / delete / update against the engine, with the book kept in step.
#include "service/ops/containers/container_ops.h"

#include <algorithm>
#include <cctype>

#include "core/log.h"
#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/base/crypto.h"
#include "service/domain/validation.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/containers/unbooked.h"
#include "service/ops/hosts/host_fanout.h"
#include "service/ops/images/internal_images.h"
#include "service/ops/policies/quota.h"
#include "service/ops/policies/usage_meter.h"
#include "service/store/book_id.h"
#include "service/store/refused_ports.h"

namespace gpulab::service {

LabContainer engine_spec(Service& s, const std::string& name, const std::string& owner,
                         const ContainerSpec& spec, const std::vector<GpuSlot>& gpus, int ssh_port,
                         std::int64_t intent) {
  LabContainer cs;
  cs.name = name;
  cs.image = spec.image;
  cs.env = spec.env;
  // The lab image's entrypoint applies the key (the password reaches it apart: run_container).
  cs.env.push_back("GPULAB_SSH_PUBKEY=" + spec.ssh_public_key);
  cs.env.push_back("GPULAB_CONTAINER_NAME=" + name);
  std::vector<std::string> uuids;
  for (const auto& g : gpus) uuids.push_back(g.uuid);
  cs.labels = {{"gpulab.managed", "true"},
               {"gpulab.owner", owner},
               {"gpulab.gpus", join(uuids, ",")},
               {"gpulab.intent", std::to_string(intent)},
               {"gpulab.ssh_port", std::to_string(ssh_port)},
               {kBookLabel, book_id(*s.store)}};
  cs.ssh_port = ssh_port;
  cs.ports = spec.ports;
  if (spec.cpus.set()) cs.nano_cpus = spec.cpus.nano_cpus;
  if (spec.memory.set()) cs.memory_bytes = spec.memory.bytes;
  if (spec.shm_size.set()) cs.shm_size_bytes = spec.shm_size.bytes;
  cs.pids_limit = spec.pids_limit;
  cs.gpus = gpus;
  return cs;
}

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

// Creates and starts the engine container for an allocated row; on failure the engine removes
// what it made. Without a new password the container keeps the one its layer has (recreate,
// restart after a crash).
std::string engine_create_start(Service& s, const std::string& host, const LabContainer& cs,
                                const std::string& password = {}) {
  auto id = s.engine_on(host).run_container(cs, password);
  if (!id) {
    Error e = id.error();
    if (s.hosts.size() > 1) e.message = "host '" + host + "': " + e.message;  // which one
    if (e.message.find("could not select device driver") != std::string::npos)
      e.hint = "host '" + host +
               "' has no NVIDIA container runtime: install the NVIDIA Container Toolkit there, or "
               "set \"device_mode\": \"none\" to book GPUs without attaching devices "
               "(docs/engines.md#many-hosts)";
    throw_engine_error(e);
  }
  return *id;
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

// How many SSH ports one create tries, and how long a port its engine refused is held back (an
// engine's stale allocation lasts until that engine forgets it; after this the port is offered
// again, at the cost of one more refusal if it is still taken).
constexpr int kSshPortTries = 3;
constexpr double kRefusedPortHoldSeconds = 600;

// Whether an engine's port refusal names `port` (":20222" in "Bind for 10.0.0.2:20222 failed:
// port is already allocated"): then it is the SSH port the service chose, not the user's.
bool names_port(const std::string& why, int port) {
  if (port == 0) return false;
  const std::string p = ":" + std::to_string(port);
  for (size_t at = why.find(p); at != std::string::npos; at = why.find(p, at + 1)) {
    const size_t end = at + p.size();
    if (end == why.size() || !std::isdigit(static_cast<unsigned char>(why[end]))) return true;
  }
  return false;
}

// The SSH port the engine refused is held back on that host, so the next choice skips it.
void hold_back_refused_ssh_port(Service& s, const Allocation& a) {
  hold_refused_port(*s.store, a.host, a.ssh_port, unix_now_precise() + kRefusedPortHoldSeconds);
  spdlog::warn(
      "host '{}' refused SSH port {} as taken while the book has it free (a stale allocation "
      "of its engine, or a container started there outside the service): not offered there for "
      "{:.0f} s",
      a.host, a.ssh_port, kRefusedPortHoldSeconds);
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
      if (refused) hold_back_refused_ssh_port(s, a);  // the last one too: a retry skips it
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
  o.spec.image = image;
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

void start_container(Service& s, const ContainerRecord& c) {
  auto st = s.engine_of(c).start_container(c.engine_ref());
  if (!st) throw_engine_error(st.error());
  s.store->set_state(c.id, state::kRunning);
}

void stop_container(Service& s, const ContainerRecord& c) {
  auto st = s.engine_of(c).stop_container(c.engine_ref(), s.config.stop_timeout_seconds);
  if (!st) throw_engine_error(st.error());
  s.store->set_state(c.id, state::kExited);
}

void restart_container(Service& s, const ContainerRecord& c) {
  auto st = s.engine_of(c).restart_container(c.engine_ref(), s.config.stop_timeout_seconds);
  if (!st) throw_engine_error(st.error());
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

namespace {

// The GPU-count change of update_resources: commit -> recreate, keeping the writable layer, the
// name and the ports. The commit comes first: the new GPUs, the new image and the "recreating"
// intent are booked in one step, so a crash leaves either the old container as booked or an
// intent the restart completes. Until the old container is removed a failure leaves the row as
// it was; after it, the reconciler completes the recreate (the old container is gone).
void recreate_with_gpus(Service& s, const ContainerRecord& c, const Engine& engine,
                        ContainerSpec spec) {
  const std::string ref = c.engine_ref();
  // Unique even for two recreates in one second: a reused tag would move off the image the
  // old container runs, leaving that image untagged and never removed.
  std::string tag = c.name + "-" + std::to_string(unix_now()) + "-" + random_secret(4);
  auto claim = s.image_claims.claim(kRecreateRepo + tag);  // until the booking below owns it
  auto img = engine.archives()->commit(ref, ImageCommit{"gpulab-recreate",
                                                        tag,
                                                        "gpulab recreate",
                                                        "gpulab",
                                                        {{"gpulab.recreate.source", c.name}}});
  if (!img) {
    s.store->set_spec(c.id, c.spec);
    throw_engine_error(img.error());
  }
  std::string old_image = spec.image;
  spec.image = kRecreateRepo + tag;
  std::vector<GpuSlot> chosen;
  // Asked before the allocation lock: a slow host must not hold up every other booking.
  std::set<std::string> outside = unleased_ddp_gpus(s);
  auto book = [&](const ContainerSpec& as, const std::vector<GpuAssignment>& gpus,
                  const std::string& st) {
    s.store->clear_gpus(c.id);
    for (const auto& g : gpus) s.store->add_gpu(c.id, g);
    s.store->set_spec(c.id, as);
    s.store->set_state(c.id, st);
  };
  try {
    std::lock_guard<std::mutex> lock(s.alloc_mu);
    s.store->transaction([&] {
      meter_tick(*s.store, s.clock->now());
      check_quota(s, c.owner, spec, false, c.id);
      const std::set<std::string> used = gpus_in_use(s, outside, c.name);
      auto pick = choose_gpus(engine.gpus()->gpus, used, spec.gpu_count, s.policy);
      if (!pick) throw ApiError(ApiCode::kGpuAllocationFailed, "GPU allocation failed");
      std::vector<GpuAssignment> now;
      for (const auto& g : *pick) now.push_back(GpuAssignment{g.uuid, g.index});
      book(spec, now, state::kRecreating);
      chosen = *pick;
    });
  } catch (...) {
    s.store->set_spec(c.id, c.spec);
    (void)engine.remove_image(spec.image);
    throw;
  }
  auto rm = engine.remove_container(ref);
  if (!rm && rm.error().code != Code::kNotFound) {
    // The old container is still there: the change is refused and the row is as it was.
    {
      std::lock_guard<std::mutex> lock(s.alloc_mu);
      s.store->transaction([&] { book(c.spec, c.gpus, c.state); });
    }
    (void)engine.remove_image(spec.image);
    throw_engine_error(rm.error());
  }
  // No new password: the container keeps the one in its committed /etc/shadow.
  auto cs = engine_spec(s, c.name, c.owner, spec, chosen, c.ssh_port, c.id);
  std::string id = engine_create_start(s, c.host, cs);
  s.store->transaction([&] {
    s.store->set_docker_id(c.id, id);
    s.store->set_state(c.id, state::kRunning);
  });
  release_internal_image(s, old_image);  // an earlier recreate's or a restored backup's
}

}  // namespace

ContainerRecord update_resources(Service& s, const ContainerRecord& c, const Json& req) {
  // Its host first: one that is down refuses (503) before the book changes.
  const Engine& engine = s.engine_of(c);
  ContainerSpec spec = apply_spec_fields(req, c.spec);
  // A GPU count change recreates from a commit: refused before the book changes where the
  // engine keeps none (recreate_with_gpus relies on this).
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
    recreate_with_gpus(s, c, engine, spec);
  return *s.store->find_container(c.id);
}

std::string create_engine_container(Service& s, const ContainerRecord& c) {
  std::vector<GpuSlot> gpus;
  const auto inventory = s.engine_of(c).gpus();  // its host's GPUs: it is made there
  for (const auto& g : c.gpus)
    if (const GpuSlot* slot = inventory->find(g.uuid)) gpus.push_back(*slot);
  auto cs = engine_spec(s, c.name, c.owner, c.spec, gpus, c.ssh_port, c.id);
  return engine_create_start(s, c.host, cs);
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
            {"image", c.spec.image},
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
