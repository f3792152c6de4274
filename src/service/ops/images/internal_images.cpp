// Owners of the service's own images, and the start-up sweep of the ones left without one.
#include "service/ops/images/internal_images.h"

#include <map>
#include <set>

#include "core/log.h"
#include "core/strings.h"
#include "service/store/book_id.h"

namespace gpulab::service {

namespace {

// Every image some row owns now, read from the book once: a host's containers own theirs on
// that host (a restored backup's image on one host is not kept alive by a container of another
// host restored from the same file); snapshots, running backups, moves still copying and the
// images requests are making (image_claims.h), which do not record a host, own theirs on every
// host.
struct OwnedImages {
  std::map<std::string, std::set<std::string>> by_host;
  std::set<std::string> everywhere;
  bool owns(const std::string& host, const std::string& image) const {
    if (everywhere.count(image)) return true;
    auto it = by_host.find(host);
    return it != by_host.end() && it->second.count(image) > 0;
  }
};

OwnedImages owned_images(Service& s) {
  OwnedImages owned;
  owned.everywhere = s.image_claims.claimed();  // first: a claim ends after its row is written
  Store& store = *s.store;
  for (const auto& c : store.containers()) owned.by_host[c.host].insert(c.spec.image);
  for (const auto& snap : store.snapshots()) owned.everywhere.insert(snap.image);
  for (const auto& b : store.backups())
    if (b.state == "running") owned.everywhere.insert(kBackupRepo + b.name);
  // A move still copying owns its image on both hosts; once rolled back or finished, its settle
  // removes the image itself, or a later sweep does.
  for (const auto& m : store.moves())
    if (m.state == "copying") owned.everywhere.insert(kMoveRepo + m.tag);
  return owned;
}

}  // namespace

bool is_internal_image(const std::string& image) {
  // By repository: "gpulab-snapshot" alone (its latest tag) is as internal as "gpulab-snapshot:x".
  const std::string repo = image.substr(0, image.find(':')) + ":";
  for (const char* r : kInternalImageRepos)
    if (repo == r) return true;
  return false;
}

void release_internal_image(Service& s, const std::string& image) {
  if (!starts_with(image, kBackupRepo) && !starts_with(image, kRecreateRepo) &&
      !starts_with(image, kMoveRepo))
    return;
  try {
    const OwnedImages owned = owned_images(s);
    for (const auto& h : s.hosts) {  // it is on the host of the container that used it
      const Engine* e = h->engine();
      if (!s.usable(*h) || owned.owns(h->name(), image)) continue;
      auto st = e->remove_image(image);
      if (!st && st.error().code != Code::kNotFound && st.error().code != Code::kConflict)
        spdlog::warn("cannot remove the unused image {}: {}", image, st.error().message);
    }
  } catch (const Exception& e) {
    // The request that let go of the image succeeded; the start-up sweep retries the removal.
    spdlog::warn("cannot remove the unused image {}: {}", image, e.error().message);
  }
}

namespace {

int sweep(Service& s, const std::string& host, const Engine& e) {
  auto images = e.list_images({std::string(kBookLabel) + "=" + book_id(*s.store)});
  if (!images) {
    spdlog::warn("cannot list images for orphans on {}: {}", host, images.error().message);
    return 0;
  }
  // The owners are read after the listing: an image listed was committed before this read, so
  // its request's claim (taken before the commit) or its row is seen.
  const OwnedImages owned = owned_images(s);
  int removed = 0;
  for (const auto& img : *images)
    for (const auto& tag : img.tags) {
      if (!is_internal_image(tag) || owned.owns(host, tag)) continue;
      if (e.remove_image(tag)) {
        s.store->audit("gpulab", "reconcile", tag, "removed",
                       "image without an owner in the book (host " + host + ")");
        ++removed;
      }
    }
  return removed;
}

}  // namespace

int remove_orphan_images(Service& s) {
  int removed = 0;
  for (const auto& h : s.hosts) {
    if (!s.usable(*h)) continue;  // a host that is down is swept when it answers again
    removed += sweep(s, h->name(), *h->engine());
  }
  return removed;
}

int remove_orphan_images_on(Service& s, const std::string& host, const Engine& e) {
  return sweep(s, host, e);
}

}  // namespace gpulab::service
