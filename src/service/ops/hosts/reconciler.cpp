// Reconciliation rules, one per book state; see reconciler.h.
#include "service/ops/hosts/reconciler.h"

#include <filesystem>

#include "core/log.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/ops/containers/container_ops.h"
#include "service/ops/containers/move_ops.h"
#include "service/ops/containers/recreate.h"
#include "service/ops/containers/refused_port.h"
#include "service/ops/containers/unbooked.h"
#include "service/ops/images/internal_images.h"
#include "service/ops/leases/lease_ops.h"
#include "service/store/book_id.h"

namespace gpulab::service {

Json ReconcileReport::to_json() const {
  return {{"rolled_back", rolled_back},
          {"finished_deletes", finished_deletes},
          {"recreated", recreated},
          {"released", released},
          {"state_fixed", state_fixed},
          {"orphans", orphans},
          {"orphans_removed", orphans_removed},
          {"backups_failed", backups_failed},
          {"images_removed", images_removed},
          {"moves_settled", moves_settled},
          {"restarted", restarted}};
}

namespace {

bool intent_matches(const EngineContainer& e, const ContainerRecord& c) {
  auto it = e.labels.find("gpulab.intent");
  return it != e.labels.end() && it->second == std::to_string(c.id);
}

void cleanup_backups(Service& s, ReconcileReport& r) {
  for (auto b : s.store->backups()) {
    if (b.state != "running") continue;
    std::error_code ec;
    std::filesystem::remove(b.file + ".partial", ec);
    for (const auto& h : s.hosts)  // on the host of the container it backed up
      if (s.usable(*h)) (void)h->engine()->remove_image(kBackupRepo + b.name);
    b.state = "failed";
    b.message = "interrupted (the service stopped while it ran)";
    s.store->upsert_backup(b);
    ++r.backups_failed;
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(s.config.backup_dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(".upload-", 0) == 0) std::filesystem::remove(e.path(), ec);
  }
}

// A lease lives while a container with its label is on the engine. Without one it is released
// once its container was seen and is gone, or when none appeared within the grace time.
void reconcile_lease(Service& s, const ContainerRecord& c,
                     const std::map<std::string, EngineContainer>& bound, ReconcileReport& r) {
  auto it = bound.find(c.name);
  if (it != bound.end()) {
    if (it->second.id != c.docker_id) s.store->set_docker_id(c.id, it->second.id);
    return;
  }
  std::int64_t made = parse_iso_time(c.created_at);
  bool expired = made < 0 || unix_now() - made > s.config.lease_grace_seconds;
  if (c.docker_id.empty() && !expired) return;  // its container is still being made
  s.store->remove_container(c.id, true);
  s.store->audit("gpulab", "reconcile", c.name, "released",
                 c.docker_id.empty() ? "lease never used" : "lease's container gone");
  s.metrics.increment("reconcile_released");
  ++r.released;
}

// A container booked as running that its host's engine stopped while the host was away (a
// dockerd restart without live-restore): started again when the config asks for it. True when
// it runs again.
bool restart_after_return(Service& s, const ContainerRecord& c, const EngineContainer& e,
                          bool host_returned, ReconcileReport& r) {
  if (!s.config.restart_on_host_return || !host_returned || c.state != state::kRunning ||
      e.state == "running")
    return false;
  ContainerRecord now = c;
  now.docker_id = e.id;  // the engine's own container, whatever the row says
  try {
    // As a user's start: an SSH port taken meanwhile (a returning engine's stale allocation)
    // gets the container recreated on a new one rather than left stopped for ever.
    start_container(s, now);
  } catch (const Exception& ex) {
    spdlog::warn("host {} is back: cannot start {} again: {}", c.host, c.name, ex.error().message);
    return false;
  }
  std::string detail = "its host " + c.host + " came back with it stopped (restart_on_host_return)";
  if (auto after = s.store->find_container(c.id); after && after->ssh_port != c.ssh_port)
    detail += "; " + ssh_port_change(c.ssh_port, after->ssh_port) + " (taken meanwhile)";
  s.store->audit("gpulab", "reconcile", c.name, "restarted", detail);
  ++r.restarted;
  return true;
}

// A recreate whose old container is gone and whose committed image is gone too (removed by hand,
// or lost with the engine's disk) can never finish: its row is released, with the loss audited,
// instead of holding its GPUs and ports for ever. True when released.
bool recreate_image_lost(Service& s, const Engine& eng, const ContainerRecord& c,
                         ReconcileReport& r) {
  auto img = eng.inspect_image(c.spec.image);
  if (img || img.error().code != Code::kNotFound) return false;  // there, or ask again next pass
  spdlog::warn("reconcile: {} cannot be recreated: its image {} is gone; its row is released",
               c.name, c.spec.image);
  s.store->remove_container(c.id, true);
  s.store->audit("gpulab", "reconcile", c.name, "released",
                 "recreate could not finish: its image " + c.spec.image + " is gone");
  s.metrics.increment("reconcile_released");
  ++r.released;
  return true;
}

// A "recreating" row: a running container of its recreate image is the new one and is booked;
// anything else of that name goes (the old container, when the crash came before its removal, or
// an attempt whose start the engine refused), and the container is made again as booked. Looked
// at under the name lock, not in the pass's listing: that may show an attempt a request has
// removed since, and booking it would release the row on the next pass.
void reconcile_recreate(Service& s, const Engine& eng, const ContainerRecord& c,
                        ReconcileReport& r) {
  try {
    auto now = eng.inspect_container(c.name);
    if (!now && now.error().code != Code::kNotFound) return;  // engine trouble: the next pass
    if (now && now->image == c.spec.image && now->state == "running") {
      s.store->set_docker_id(c.id, now->id);
      s.store->set_state(c.id, state::kRunning);
      ++r.recreated;
      return;
    }
    if (now) (void)eng.remove_container(now->id);
    if (recreate_image_lost(s, eng, c, r)) return;
    finish_recreate(s, c.id);
    const int port = s.store->find_container(c.id)->ssh_port;
    if (port != c.ssh_port)
      s.store->audit("gpulab", "reconcile", c.name, "recreated",
                     ssh_port_change(c.ssh_port, port) + " (taken meanwhile)");
    ++r.recreated;
  } catch (const Exception& ex) {
    spdlog::warn("reconcile: cannot recreate {}: {}", c.name, ex.error().message);
  }
}

// One container row (not a lease) against the engine's view: finish or roll back what a crash
// interrupted, release what is gone, correct the booked state (`host_returned`:
// restart_after_return).
void reconcile_container(Service& s, const ContainerRecord& c,
                         const std::map<std::string, EngineContainer>& engine, bool host_returned,
                         ReconcileReport& r) {
  if (c.state == state::kMoving) return;  // its move (or settle_moves) decides
  // An intent is resolved at run time too: the caller holds the container's name lock, which
  // every request that writes an intent keeps until it returns, so an intent seen here belongs to
  // no request in flight. Its request died with the service, or failed when its host's engine
  // went away mid-way (a delete or a GPU-count recreate cut by a dockerd kill); waiting for a
  // service restart would keep that row's GPUs and ports booked after the host is back.
  // A host that is down (or no longer configured) decides nothing: its rows keep their GPUs and
  // ports until its engine answers again.
  const Host* h = s.find_host(c.host);
  if (!h || !s.usable(*h)) return;
  const Engine& eng = *h->engine();
  if (c.state == state::kRecreating) return reconcile_recreate(s, eng, c, r);  // looks itself
  auto it = engine.find(c.name);
  std::optional<EngineContainer> looked;
  if (it == engine.end()) {
    // The engine listing predates the row: ask the engine once more before deciding.
    auto info = eng.inspect_container(c.name);
    if (info) {
      looked = *info;
    } else if (info.error().code != Code::kNotFound) {
      return;  // engine trouble: decide nothing
    }
  }
  const EngineContainer* e = it != engine.end() ? &it->second : (looked ? &*looked : nullptr);
  if (c.state == state::kCreating) {
    if (e && intent_matches(*e, c)) (void)eng.remove_container(e->id);
    s.store->remove_container(c.id, false);
    s.store->audit("gpulab", "reconcile", c.name, "rolled back unfinished create");
    ++r.rolled_back;
  } else if (c.state == state::kDeleting) {
    if (e) (void)eng.remove_container(e->id);
    s.store->remove_container(c.id, true);
    release_internal_image(s, c.spec.image);
    s.store->audit("gpulab", "reconcile", c.name, "finished delete");
    ++r.finished_deletes;
  } else if (!e) {
    // Removed outside the service: release its GPUs and ports.
    s.store->remove_container(c.id, true);
    release_internal_image(s, c.spec.image);
    s.store->audit("gpulab", "reconcile", c.name, "released", "container gone from the engine");
    s.metrics.increment("reconcile_released");
    ++r.released;
  } else if (!restart_after_return(s, c, *e, host_returned, r)) {
    auto book_state = [](const std::string& engine_state) {
      return engine_state == "running"   ? state::kRunning
             : engine_state == "created" ? state::kCreated
                                         : state::kExited;
    };
    std::string id = e->id, want = book_state(e->state);
    if ((want != c.state || id != c.docker_id) && !looked) {
      // The listing predates the lock: a request may have replaced the container since (a
      // GPU-count recreate gives it a new id). Correcting the row from the stale listing would
      // book the removed container, so decide on a fresh look.
      auto info = eng.inspect_container(c.name);
      if (!info) return;  // gone since, or engine trouble: the next pass decides
      id = info->id;
      want = book_state(info->state);
    }
    if (want != c.state || id != c.docker_id) {
      s.store->set_state(c.id, want);
      if (id != c.docker_id) s.store->set_docker_id(c.id, id);
      ++r.state_fixed;
    }
  }
}

// Engine containers with our book's label but no row: a create the engine finished after a
// crash rolled its row back. Another service's (or unlabelled) ones are only counted.
void remove_unbooked(Service& s, const std::map<std::string, EngineContainer>& engine,
                     const std::map<std::string, std::string>& host_of,
                     const std::set<std::string>& booked, ReconcileReport& r) {
  for (const auto& [name, e] : engine) {
    if (booked.count(name) || e.labels.count(kLeaseLabel)) continue;
    if (!made_by_this_book(*s.store, e.labels)) {
      ++r.orphans;  // another service's, or made before books had ids: reported only
      continue;
    }
    // Ours without a row: the engine finished a create after a crash rolled its row back. The
    // name lock waits out a create in flight (its row exists before the engine is asked).
    auto lock = s.lock_container(name);
    if (s.store->find_container(name)) continue;
    const Host* h = s.find_host(host_of.at(name));
    if (h && h->engine() && remove_unbooked_container(s, *h->engine(), name, e.id, e.labels))
      ++r.orphans_removed;
  }
}

}  // namespace

ReconcileReport reconcile(Service& s, bool startup) {
  ReconcileReport r;
  // Moves first: a rollback gives a row its state back, a finish removes the source's container
  // of the same name, before the rows are compared with the engines.
  r.moves_settled = settle_moves(s, startup);
  std::map<std::string, std::string> host_of, missed;
  auto engine = engine_containers(s, &host_of, &missed);
  std::map<std::string, std::string> lease_missed;
  auto leased = lease_containers(s, &lease_missed);
  missed.insert(lease_missed.begin(), lease_missed.end());
  // The hosts back since their last pass.
  std::set<std::string> back;
  for (const auto& h : s.hosts)
    if (h->returned()) back.insert(h->name());
  std::set<std::string> booked;
  for (const auto& listed : s.store->containers()) {
    booked.insert(listed.name);
    auto lock = s.lock_container(listed.name);
    // Re-read under the lock: a request may have changed the row since the listing.
    auto fresh = s.store->find_container(listed.id);
    if (!fresh) continue;
    const ContainerRecord& c = *fresh;
    if (missed.count(c.host)) continue;  // its host did not answer in time: the next pass decides
    if (is_lease(c)) {
      const Host* h = s.find_host(c.host);
      if (!h || !s.usable(*h)) continue;  // a down host's lease keeps its GPUs, as its rows do
      // The listing may predate a container made since: look again before releasing.
      if (!leased.count(c.name) && !c.docker_id.empty()) leased = lease_containers(s);
      reconcile_lease(s, c, leased, r);
      continue;
    }
    reconcile_container(s, c, engine, back.count(c.host) > 0, r);
  }
  for (const auto& h : s.hosts)
    if (back.count(h->name()) && !missed.count(h->name()) && s.usable(*h)) h->set_returned(false);
  remove_unbooked(s, engine, host_of, booked, r);
  s.metrics.increment("reconcile_passes");  // tests wait for a pass that began after a change
  if (startup) cleanup_backups(s, r);
  // Every pass, not only at start: a commit or load that a kill of the service cut off may end in
  // the engine after the start's sweep (the engine finishes it without its client). After the
  // rows and containers above settled; a request of this process still making one holds a claim.
  r.images_removed = remove_orphan_images(s);
  return r;
}

}  // namespace gpulab::service
