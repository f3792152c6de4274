// Keeps the book in step with the engines (the engines are the truth): a pass completes or rolls
// back intents a crash or a lost engine left behind and notices containers that died or were
// removed outside the service (event_watcher.h runs it on events and periodically).
#pragma once

#include <map>
#include <string>

#include "service/ops/service.h"

namespace gpulab::service {

struct ReconcileReport {
  int rolled_back = 0;       // "creating" rows whose create never finished
  int finished_deletes = 0;  // "deleting" rows
  int recreated = 0;         // "recreating" rows completed
  int released = 0;          // containers gone from the engine: GPUs and ports released
  int state_fixed = 0;       // running/exited brought in line with the engine
  int orphans = 0;           // managed containers on the engine without a row (reported only)
  int orphans_removed = 0;   // ours (this book's label) without a row: a create cut off by a crash
  int backups_failed = 0;    // backups cut off
  int images_removed = 0;    // snapshot, backup, recreate or move images left without an owner
  int moves_settled = 0;     // moves rolled back, or their cleanups finished (settle_moves)
  int restarted = 0;         // booked running, stopped by their host's engine restart: started
  Json to_json() const;
};

// Completes or rolls back intents (rows in creating / deleting / recreating) whose request is no
// longer in flight; startup: also fails interrupted backups and removes orphan images.
// With restart_on_host_return, the containers booked as running of a host back since its last
// pass (Host::returned) that its engine stopped meanwhile are started again.
ReconcileReport reconcile(Service& s, bool startup);

}  // namespace gpulab::service
