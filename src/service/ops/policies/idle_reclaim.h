// Idle reclaim: a running container whose GPUs all stay below a utilization threshold, with no
// SSH session and (almost) no network traffic for a while is warned (audit event and a line in
// its /etc/motd), then stopped, not deleted; the policy (default "*" and per user) says whether
// its GPUs go back to the pool. Utilization comes from the GPU vendor table's samples, traffic
// and SSH sessions from the container's own /proc/net (one exec; proc_net.h).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "service/domain/validation.h"
#include "service/engine/inventory.h"
#include "service/ops/policies/proc_net.h"
#include "service/ops/service.h"

namespace gpulab::service {

struct IdlePolicy {
  bool enabled = false;
  double utilization_percent = 5;      // every GPU below this counts as idle
  double idle_minutes = 60;            // idle this long: warned
  double warn_minutes = 15;            // still idle this long after the warning: stopped
  std::int64_t network_bytes = 65536;  // less traffic than this between two checks: none
  bool release_gpus = false;           // stopped with its GPUs given back (it keeps its ports)
  static IdlePolicy from_json(const Json& stored);
  Json to_json() const;
};

IdlePolicy idle_policy(Store& store, const std::string& user);
// Validates and stores an idle-policy request for a user ("*": the default); returns the result.
Json set_idle_policy(Store& store, const Json& request);
const RequestSchema& idle_policy_schema();

class IdleReclaimer {
 public:
  explicit IdleReclaimer(Service& s) : s_(s) {}
  struct Report {
    int checked = 0, idle = 0, warned = 0, stopped = 0;
  };
  // One pass at s.clock->now(), with these GPU samples (a GPU without one is never idle: the
  // service cannot tell, so it does not guess).
  Report check(const std::vector<GpuSample>& samples);

 private:
  struct Watch {
    double idle_since = -1, warned_at = -1;
    std::int64_t net_bytes = -1;
  };
  bool busy(const ContainerRecord& c, const IdlePolicy& p, const std::vector<GpuSample>& samples,
            Watch& w, std::string& why);
  void warn(const ContainerRecord& c, const IdlePolicy& p, double idle_s);
  void reclaim(const ContainerRecord& c, const IdlePolicy& p);
  Service& s_;
  std::map<std::int64_t, Watch> watch_;  // by container row id
};

}  // namespace gpulab::service
