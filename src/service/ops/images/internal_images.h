// The images the service makes itself: snapshots ("gpulab-snapshot:NAME", owned by their snapshot
// row), backups ("gpulab-backup:NAME", owned by a running backup or, once restored, by the rows
// that run it), GPU-count recreates ("gpulab-recreate:TAG", owned by the row that runs it) and
// moves ("gpulab-move:TAG", owned by the move's journal row). One with no owner left is an orphan:
// it only fills the engine's disk.
#pragma once

#include <array>
#include <string>

#include "service/ops/service.h"

namespace gpulab::service {

// Their repositories, with the colon: an image's name is one of these + its name or tag.
inline constexpr const char* kSnapshotRepo = "gpulab-snapshot:";
inline constexpr const char* kBackupRepo = "gpulab-backup:";
inline constexpr const char* kRecreateRepo = "gpulab-recreate:";
inline constexpr const char* kMoveRepo = "gpulab-move:";
inline constexpr std::array<const char*, 4> kInternalImageRepos = {kSnapshotRepo, kBackupRepo,
                                                                   kRecreateRepo, kMoveRepo};

// Whether `image` ("repo:tag") is one of the four kinds above.
bool is_internal_image(const std::string& image);

// Removes `image` (a backup, recreate or move image) from each host where no container row of
// that host runs it any more (a snapshot image stays: its snapshot row owns it). The engine
// refuses while a container uses it.
void release_internal_image(Service& s, const std::string& image);

// Removes every internal image of this book (gpulab.book label) that nothing owns: the ones a
// SIGKILL cut off between the engine's commit or load and the row that would own them. At
// start-up and on every reconcile pass (such a commit can end after the start); a request
// between its commit and its row holds a claim (image_claims.h).
int remove_orphan_images(Service& s);

// The same sweep on one engine of a host that was down and answers again, run before it is marked
// up (Host::check). What it finds is what an engine kill cut off (a commit the engine made whose
// answer never came); a request still in flight from before the host went down holds a claim.
int remove_orphan_images_on(Service& s, const std::string& host, const Engine& e);

}  // namespace gpulab::service
