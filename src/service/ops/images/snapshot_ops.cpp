// Snapshot = docker commit with gpulab labels, recorded in the book with the source's settings.
#include "service/ops/images/snapshot_ops.h"

#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/domain/validation.h"
#include "service/ops/images/internal_images.h"

namespace gpulab::service {

SnapshotRecord take_snapshot(Service& s, const Principal& who, const std::string& container,
                             const std::string& snapshot_name) {
  check_name(snapshot_name, "snapshot_name");
  ContainerRecord c = require_container(s, who, container);
  if (s.store->find_snapshot(snapshot_name))
    throw ApiError(ApiCode::kNameConflict, "Snapshot '" + snapshot_name + "' already exists");
  auto lock = s.lock_container(c.name);
  c = require_container(s, who, container);  // under the lock: a recreate may have replaced it
  SnapshotRecord r;
  r.name = snapshot_name;
  r.owner = c.owner;
  r.source = c.name;
  r.image = kSnapshotRepo + snapshot_name;
  r.created_at = iso_now();
  r.spec = c.spec;
  ImageCommit cs;
  cs.repo = "gpulab-snapshot";
  cs.tag = snapshot_name;
  cs.comment = "gpulab snapshot of " + c.name;
  cs.author = c.owner;
  cs.labels = {{"gpulab.snapshot", snapshot_name},
               {"gpulab.snapshot.owner", c.owner},
               {"gpulab.snapshot.source", c.name},
               {"gpulab.snapshot.time", r.created_at}};
  // The image stays on the container's host: a restore is placed where it is.
  auto claim = s.image_claims.claim(r.image);  // until its snapshot row owns it
  auto img = require_archives(s.engine_of(c), "snapshots").commit(c.engine_ref(), cs);
  if (!img) throw_engine_error(img.error());
  try {
    s.store->add_snapshot(r);
  } catch (const Exception&) {
    (void)s.engine_of(c).remove_image(r.image);
    throw ApiError(ApiCode::kNameConflict, "Snapshot '" + snapshot_name + "' already exists");
  }
  s.store->audit(who.user, "snapshot", snapshot_name, "ok", "source=" + c.name);
  return r;
}

CreateOutcome restore_snapshot(Service& s, const Principal& who, const Json& req) {
  std::string snap = req["snapshot_name"].get<std::string>();
  check_name(snap, "snapshot_name");
  auto r = s.store->find_snapshot(snap);
  if (!r) throw ApiError(ApiCode::kSnapshotNotFound, "Snapshot '" + snap + "' not found");
  require_owner(who, r->owner, "Snapshot '" + snap + "'");
  return create_container(s, restore_options(who, req, r->spec, r->image));
}

void delete_snapshot(Service& s, const Principal& who, const std::string& name) {
  check_name(name, "snapshot_name");
  auto r = s.store->find_snapshot(name);
  if (!r) throw ApiError(ApiCode::kSnapshotNotFound, "Snapshot '" + name + "' not found");
  require_owner(who, r->owner, "Snapshot '" + name + "'");
  for (const auto& h : s.hosts) {  // the image is on the host its source container was on
    if (s.hosts.size() > 1 && (!s.usable(*h) || !h->engine()->image_exists(r->image))) continue;
    auto st = s.engine_on(h->name()).remove_image(r->image);
    if (!st && st.error().code != Code::kNotFound) {
      if (st.error().code == Code::kConflict)
        throw ApiError(ApiCode::kStateConflict, "Snapshot '" + name + "' is used by a container",
                       "delete the containers restored from it first");
      throw_engine_error(st.error());
    }
  }
  s.store->remove_snapshot(name);
  s.store->audit(who.user, "delete-snapshot", name, "ok");
}

Json snapshot_json(const SnapshotRecord& r) {
  return {{"snapshot_name", r.name}, {"image", r.image},           {"source_container", r.source},
          {"owner", r.owner},        {"created_at", r.created_at}, {"gpu_count", r.spec.gpu_count}};
}

}  // namespace gpulab::service
