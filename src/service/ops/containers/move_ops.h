// Moving a stopped container to another host: commit on the source, the image streamed engine to
// engine through the service's memory (image_pipe.h), the same container created on the target
// (not started), then the source removed. Journaled in the book (`moves`, MoveRecord) so that a
// failure or a crash at any point ends with exactly one whole container: on the target once the
// book has switched it there (commit_move), else on the source, untouched.
#pragma once

#include <cstdint>
#include <string>

#include "service/domain/principal.h"
#include "service/ops/service.h"

namespace gpulab::service {

// The label on a move's image and on the container it lands on the target: gpulab.move=<tag>
// (how a rollback knows the target's container of that name is the move's, not another).
inline constexpr const char* kMoveLabel = "gpulab.move";

struct MoveOutcome {
  ContainerRecord record;                         // as booked after the move
  std::string from;                               // the host it left
  std::int64_t bytes = 0;                         // the image archive streamed
  double seconds = 0;                             // the whole move
  double commit_seconds = 0, stream_seconds = 0;  // its two long steps
};

// Moves `who`'s stopped container `name` to host `to`. INVALID_REQUEST for an unknown host, 503
// naming a host that is down, STATE_CONFLICT for a running (or already there) container,
// NAME_CONFLICT when the target holds a container of that name, GPU_ALLOCATION_FAILED /
// PORT_CONFLICT / PORT_EXHAUSTED when the target has no room; after any failure the container is
// whole on its first host and the target holds nothing of the move (or, with the target down, a
// journal row that removes what is left there once it answers).
MoveOutcome move_container(Service& s, const Principal& who, const std::string& name,
                           const std::string& to);

// Settles the journal: a move left "copying" by a crash is rolled back (startup only: at run time
// a request owns it); the cleanups left for a host that was down ("rollback": the target's
// leftovers, "finish": the source's container and image) run once it is up. How many ended.
int settle_moves(Service& s, bool startup);

}  // namespace gpulab::service
