// Forgetting a host that left the config for good (a retired server): the book lets go of every
// row it kept for it (containers and ddp leases with their GPUs and ports, its resting ports, the
// move journal rows that name it) in one transaction, so their GPUs, ports and quota usage are
// free again. No engine is asked: whatever still runs on that machine is left as it is.
#pragma once

#include <string>
#include <vector>

#include "service/domain/records.h"
#include "service/domain/validation.h"
#include "service/ops/service.h"

namespace gpulab::service {

struct ForgetReport {
  std::string host;
  bool dry_run = false;
  std::vector<ContainerRecord> containers;         // its container and lease rows
  std::vector<GpuAssignment> gpus;                 // released (a move's pending ones too)
  std::vector<std::pair<std::string, int>> ports;  // (host, port) released
  std::vector<MoveRecord> moves;                   // journal rows naming it, dropped
  Json to_json() const;
  // What the admin's host view lists for it: counts of rows, GPUs and ports, and the owners.
  Json summary_json() const;
  std::string message() const;
};

// The hosts outside the config that the book still holds rows on: what can be forgotten.
std::vector<std::string> retired_hosts(Service& s);

// What forgetting each retired host would let go of, read in one transaction; changes nothing.
// The caller checks that the asker is an admin (it names other users' containers).
std::vector<ForgetReport> survey_retired_hosts(Service& s);

// Forgets `host`'s rows (with dry_run: only says what it would forget). Refuses with ApiError,
// changing nothing: a name no config could give (INVALID_REQUEST), a host still in the config
// (STATE_CONFLICT: its containers are deleted or moved instead), a host the book holds nothing on
// (NOT_FOUND, naming the hosts that can be forgotten). The caller checks that `who` is an admin;
// the audit log gets one line per forgotten row and one for the host.
ForgetReport forget_host(Service& s, const std::string& host, bool dry_run, const std::string& who);

const RequestSchema& forget_host_schema();

}  // namespace gpulab::service
