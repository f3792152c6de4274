// Per-user quotas with a default for everyone: GPUs held, containers, CPUs and memory in total,
// and GPU-hours in a rolling period. check_quota runs inside the allocation's transaction (under
// the allocation lock), so two concurrent requests can never both pass a limit that only one fits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "service/domain/records.h"
#include "service/domain/validation.h"
#include "service/ops/service.h"

namespace gpulab::service {

struct QuotaLimits {
  std::optional<std::int64_t> max_gpus, max_containers, max_memory_bytes;
  std::optional<double> max_cpus, max_gpu_hours;
  double period_hours = 168;  // the rolling window of max_gpu_hours (a week)
  static QuotaLimits from_json(const Json& stored);
  Json to_json() const;  // unlimited fields as null
};

struct QuotaUsage {
  std::int64_t gpus = 0, containers = 0, memory_bytes = 0;
  double cpus = 0, gpu_hours = 0;  // gpu_hours: in the last period_hours
  Json to_json() const;
};

// The limits that apply to `user`: the default's fields, overridden by the user's.
QuotaLimits quota_limits(Store& store, const std::string& user);
// What `user` holds now (leases count for GPUs, not as containers); `except_id`'s row left out.
QuotaUsage quota_usage(Service& s, const std::string& user, const QuotaLimits& limits,
                       std::int64_t except_id = 0);

// Throws QUOTA_EXCEEDED (message and hint: in use, asked, limit) unless `user` may hold `want`
// on top of what they hold (as a new container when new_container; `except_id` is the row a
// change replaces). Call inside the allocation's transaction.
void check_quota(Service& s, const std::string& user, const ContainerSpec& want, bool new_container,
                 std::int64_t except_id = 0);

// {"user", "limits", "usage"} as the API shows it (status, list, GET quotas).
Json quota_json(Service& s, const std::string& user);

// Validates a quota request's fields (user, max_*, period_hours, reset) and stores them for the
// user ("*": the default); returns the stored object. INVALID_REQUEST on a bad value.
Json set_quota(Store& store, const Json& request);

const RequestSchema& quota_schema();

}  // namespace gpulab::service
