// The move of move_ops.h: check, book the target, copy the image, create, commit, clean up; and
// the journal's settling after a failure, a crash or a host that was down.
#include "service/ops/containers/move_ops.h"

#include <chrono>
#include <thread>

#include "core/log.h"
#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/base/crypto.h"
#include "service/domain/gpu_allocator.h"
#include "service/domain/validation.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/containers/container_ops.h"
#include "service/ops/containers/engine_container.h"
#include "service/ops/images/image_pipe.h"
#include "service/ops/images/internal_images.h"
#include "service/store/book_id.h"

namespace gpulab::service {

namespace {

constexpr std::size_t kPipeBytes = 8 << 20;  // the most of an image held in memory at once
constexpr const char* kCopying = "copying";
constexpr const char* kRollback = "rollback";
constexpr const char* kFinish = "finish";

std::string move_image(const std::string& tag) {
  return kMoveRepo + tag;
}

bool gone_or_ok(const Status& st) {
  return st.ok() || st.error().code == Code::kNotFound;
}

// An engine failure on `host`, as the API's error with the host named.
[[noreturn]] void throw_on_host(const std::string& host, const std::string& what, Error e) {
  e.message = what + " on host '" + host + "': " + e.message;
  throw_engine_error(e);
}

// What a move of `c` to `target` must not start without: another host, a stopped container,
// and no container of that name on the target; image archives on both engines (UNSUPPORTED).
void check_movable(Service& s, const ContainerRecord& c, const std::string& target) {
  if (c.host == target)
    throw ApiError(ApiCode::kStateConflict,
                   "Container '" + c.name + "' is already on host '" + target + "'");
  const Engine& from = s.engine_of(c);  // 503 naming the source while it is down
  (void)require_archives(from, "moves");
  (void)require_archives(s.engine_on(target), "moves");
  auto info = from.inspect_container(c.engine_ref());
  if (!info) throw_on_host(c.host, "inspect " + c.name, info.error());
  if (info->state != "exited" && info->state != "created" && info->state != "dead")
    throw ApiError(ApiCode::kStateConflict,
                   "Container '" + c.name + "' is " + info->state + " on host '" + c.host +
                       "'; only a stopped container can be moved",
                   "stop it first (POST /api/v1/gpu-docker/stop), then move it");
  // A commit leaves a volume's contents out: moving would lose them without a word.
  if (!info->volumes.empty())
    throw ApiError(ApiCode::kStateConflict,
                   "Container '" + c.name + "' keeps data in volumes (" +
                       join(info->volumes, ", ") + ") that a move cannot carry",
                   "copy that data into the container's filesystem, or back it up by hand");
  auto there = s.engine_on(target).inspect_container(c.name);
  if (there)
    throw ApiError(ApiCode::kNameConflict,
                   "A container named '" + c.name + "' exists on host '" + target + "'",
                   "ask the host's admin to remove it (docker rm), or move another container");
  if (there.error().code != Code::kNotFound)
    throw_on_host(target, "inspect " + c.name, there.error());
}

struct TargetBooking {
  std::vector<GpuSlot> gpus;
  int ssh_port = 0;
};

// The target's GPUs, SSH port and the user's host ports, booked as pending rows with the journal
// row and the "moving" state, in one transaction under the allocation lock. No quota check: the
// container keeps its GPU count, so the user's sum does not change.
TargetBooking book_target(Service& s, const ContainerRecord& c, const MoveRecord& m) {
  const Host& h = *s.find_host(m.target_host);
  std::set<std::string> outside;  // asked before the lock: a slow host holds up no booking
  if (c.spec.gpu_count > 0) outside = unleased_ddp_gpus(s);
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  return s.store->transaction([&] {
    const std::set<std::string> used = gpus_in_use(s, outside);
    TargetBooking b;
    auto pick = choose_gpus(h.inventory()->gpus, used, c.spec.gpu_count, s.policy);
    if (!pick)
      throw ApiError(ApiCode::kGpuAllocationFailed, "GPU allocation failed",
                     std::to_string(c.spec.gpu_count) + " GPU(s) needed on host '" + h.name() +
                         "', which has not that many free: free some there, or pick another host");
    b.gpus = *pick;
    // The user's host ports move with the container: they must be free there too.
    b.ssh_port = choose_host_ports(s, h, c.spec.ports, c.ssh_port != 0);
    if (b.ssh_port != 0) s.store->add_pending_port(c.id, h.name(), b.ssh_port, "ssh", 22);
    for (const auto& p : c.spec.ports)
      s.store->add_pending_port(c.id, h.name(), p.host_port, "user", p.container_port);
    for (const auto& g : b.gpus) s.store->add_pending_gpu(c.id, GpuAssignment{g.uuid, g.index});
    s.store->insert_move(m);
    s.store->set_state(c.id, state::kMoving);
    return b;
  });
}

// Commit on the source, then its save streamed into the target's load: the bytes streamed and
// how long each step took, into `out`.
void copy_image(Service& s, const ContainerRecord& c, const MoveRecord& m, MoveOutcome& out) {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  const EngineArchives& from = require_archives(s.engine_on(m.source_host), "moves");
  const Engine& to_engine = s.engine_on(m.target_host);
  const EngineArchives& to = require_archives(to_engine, "moves");
  const std::string image = move_image(m.tag);
  ImageCommit ic{"gpulab-move",
                 m.tag,
                 "gpulab move of " + c.name + " to " + m.target_host,
                 "gpulab",
                 {{kMoveLabel, m.tag}, {kBookLabel, book_id(*s.store)}}};
  auto img = from.commit(c.engine_ref(), ic);
  if (!img) throw_on_host(m.source_host, "commit " + c.name, img.error());
  auto t1 = Clock::now();
  ImagePipe pipe(kPipeBytes);
  Status saved = ok_status();
  std::thread saver([&] {
    saved = from.save_image(image, [&](std::string_view piece) { return pipe.write(piece); });
    pipe.close_write(saved);
  });
  auto loaded = to.load_images(-1, [&](char* buf, std::size_t cap) { return pipe.read(buf, cap); });
  pipe.close_read();
  saver.join();
  // Whichever side broke first says why: the other only saw its pipe close.
  if (!loaded && (saved.ok() || pipe.reader_went_first()))
    throw_on_host(m.target_host, "load the image", loaded.error());
  if (!saved) throw_on_host(m.source_host, "save the image", saved.error());
  if (!loaded) throw_on_host(m.target_host, "load the image", loaded.error());
  if (!to_engine.image_exists(image))
    throw ApiError(ApiCode::kInternalError,
                   "Image " + image + " missing on host '" + m.target_host + "' after its load");
  out.bytes = pipe.bytes();
  out.commit_seconds = std::chrono::duration<double>(t1 - t0).count();
  out.stream_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
}

// Removes what the move left on the target: its container (only the one carrying this move's
// label) and its image. False when the target cannot be asked now.
bool clean_target(Service& s, const MoveRecord& m) {
  const Host* h = s.find_host(m.target_host);
  if (!h || !s.usable(*h)) return false;
  const Engine& e = *h->engine();
  auto info = e.inspect_container(m.name);
  if (info) {
    auto it = info->labels.find(kMoveLabel);
    if (it != info->labels.end() && it->second == m.tag &&
        !gone_or_ok(e.remove_container(info->id)))
      return false;
  } else if (info.error().code != Code::kNotFound) {
    return false;
  }
  return gone_or_ok(e.remove_image(move_image(m.tag)));
}

// Undoes a move that never committed: the source's commit image goes, the target's booking goes
// at once (nothing runs there), the row gets its state back; the target's leftovers go now or,
// with the target down, once it answers (the journal row stays as "rollback").
void rollback_move(Service& s, const MoveRecord& m) {
  if (const Host* h = s.find_host(m.source_host); h && s.usable(*h))
    (void)h->engine()->remove_image(move_image(m.tag));  // else the start-up sweep removes it
  bool clean = false;
  try {
    clean = clean_target(s, m);
  } catch (const Exception& e) {
    spdlog::warn("move {}: cleaning host {}: {}", m.name, m.target_host, e.error().message);
  }
  s.store->transaction([&] {
    s.store->drop_pending(m.container_id);
    if (auto row = s.store->find_container(m.container_id); row && row->state == state::kMoving)
      s.store->set_state(m.container_id, m.prev_state);
    if (clean)
      s.store->remove_move(m.tag);
    else
      s.store->set_move_state(m.tag, kRollback);
  });
}

// After the commit: the source's container (by id: the target's has the same name) and the
// commit image go, then the image the container ran before if nothing else uses it. False when
// the source cannot be asked now (the journal row stays as "finish").
bool finish_move(Service& s, const MoveRecord& m) {
  const Host* h = s.find_host(m.source_host);
  if (!h || !s.usable(*h)) return false;
  const Engine& e = *h->engine();
  if (!gone_or_ok(e.remove_container(m.source_id.empty() ? m.name : m.source_id))) return false;
  if (!gone_or_ok(e.remove_image(move_image(m.tag)))) return false;
  s.store->remove_move(m.tag);
  release_internal_image(s, m.old_image);
  return true;
}

// Creates the container on the target as booked (stopped, keeping the password its layer
// holds), then switches the book to it in one transaction: the move's point of no return.
ContainerRecord land_on_target(Service& s, const ContainerRecord& c, const MoveRecord& m,
                               const TargetBooking& b) {
  ContainerSpec spec = c.spec;
  spec.run_from(move_image(m.tag));
  LabContainer cs = engine_spec(s, c.name, c.owner, spec, b.gpus, b.ssh_port, c.id);
  cs.labels[kMoveLabel] = m.tag;
  auto id = s.engine_on(m.target_host).create_container(cs, {});
  if (!id) throw_on_host(m.target_host, "create " + c.name, id.error());
  s.store->commit_move(m, *id, spec, b.ssh_port, state::kCreated);
  return *s.store->find_container(c.id);
}

MoveRecord new_move(const ContainerRecord& c, const std::string& target) {
  MoveRecord m;
  m.tag = c.name + "-" + std::to_string(unix_now()) + "-" + random_secret(4);
  m.container_id = c.id;
  m.name = c.name;
  m.source_host = c.host;
  m.target_host = target;
  m.source_id = c.docker_id;
  m.prev_state = c.state;
  m.old_image = c.spec.image;
  m.state = kCopying;
  m.started_at = iso_now();
  return m;
}

}  // namespace

MoveOutcome move_container(Service& s, const Principal& who, const std::string& name,
                           const std::string& to) {
  const auto t0 = std::chrono::steady_clock::now();
  check_name(name, "container name");
  const std::string target = asked_host(s, to).name();  // 400 unknown, 503 down
  MoveOutcome out;
  MoveRecord m;
  TargetBooking b;
  ContainerRecord c;
  {
    auto lock = s.lock_container(require_container(s, who, name).name);
    c = require_container(s, who, name);  // under the lock: a request may have changed it
    settle_moves(s, false);               // an earlier move's leftovers on the target go first
    check_movable(s, c, target);
    m = new_move(c, target);
    b = book_target(s, c, m);  // from here on the row is "moving": other requests are refused
  }
  try {
    copy_image(s, c, m, out);
    out.record = land_on_target(s, c, m, b);
  } catch (...) {
    std::string why = "to " + target;
    try {
      throw;
    } catch (const std::exception& e) {
      why += ": " + std::string(e.what());
    } catch (...) {
    }
    try {
      rollback_move(s, m);
    } catch (const Exception& e) {  // the book: the start-up settling rolls it back
      spdlog::error("move {}: rollback: {}", name, e.error().message);
    }
    s.store->audit(who.user, "move", name, "failed", why);
    spdlog::warn("move {} from {} {}", name, c.host, why);
    throw;
  }
  if (!finish_move(s, m))
    spdlog::warn("move {}: host {} is down; its old container goes once it answers", name, c.host);
  out.from = c.host;
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  s.store->audit(who.user, "move", name, "ok",
                 "from=" + c.host + " to=" + target + " bytes=" + std::to_string(out.bytes) +
                     " seconds=" + std::to_string(out.seconds) +
                     " commit_seconds=" + std::to_string(out.commit_seconds) +
                     " stream_seconds=" + std::to_string(out.stream_seconds));
  return out;
}

int settle_moves(Service& s, bool startup) {
  int ended = 0;
  for (const auto& m : s.store->moves()) {
    try {
      if (m.state == kCopying) {
        if (!startup) continue;  // a request in flight owns it
        rollback_move(s, m);
        s.store->audit("gpulab", "reconcile", m.name, "rolled back unfinished move",
                       "to=" + m.target_host);
        ++ended;
      } else if (m.state == kRollback) {
        if (!clean_target(s, m)) continue;
        s.store->remove_move(m.tag);
        s.store->audit("gpulab", "reconcile", m.name, "cleaned a failed move's target",
                       "host=" + m.target_host);
        ++ended;
      } else if (m.state == kFinish && finish_move(s, m)) {
        s.store->audit("gpulab", "reconcile", m.name, "finished move", "from=" + m.source_host);
        ++ended;
      }
    } catch (const Exception& e) {
      spdlog::warn("move {}: {}", m.name, e.error().message);
    }
  }
  return ended;
}

}  // namespace gpulab::service
