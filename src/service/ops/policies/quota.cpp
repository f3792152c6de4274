// Quota limits from the user policies, usage from the book, and the check allocate() calls.
#include "service/ops/policies/quota.h"

#include <cmath>
#include <cstdio>

#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/ops/policies/policy_request.h"
#include "service/ops/policies/usage_meter.h"
#include "service/store/user_policy.h"

namespace gpulab::service {

namespace {

const std::string kUnlimitedHint = "or \"unlimited\" (-1) to lift the limit";

using FT = FieldType;

template <typename T>
std::optional<T> limit_field(const Json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
  T v = j[key].get<T>();
  if (v < 0) return std::nullopt;  // -1: unlimited, also over a default
  return v;
}

template <typename T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

std::string fmt_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

bool unlimited(const Json& v) {
  return (v.is_string() && v.get<std::string>() == "unlimited") ||
         (v.is_number() && v.get<double>() == -1);
}

[[noreturn]] void exceeded(const std::string& what, const std::string& in_use,
                           const std::string& asked, const std::string& limit,
                           const std::string& user) {
  throw ApiError(ApiCode::kQuotaExceeded,
                 "Quota exceeded for " + user + ": " + what + " in use " + in_use + ", asked " +
                     asked + ", limit " + limit,
                 "in use " + in_use + " of " + limit + " " + what +
                     "; delete or shrink a container, or ask an admin to raise the quota (GET "
                     "/api/v1/gpu-docker/quotas shows yours)");
}

}  // namespace

QuotaLimits QuotaLimits::from_json(const Json& j) {
  QuotaLimits q;
  q.max_gpus = limit_field<std::int64_t>(j, "max_gpus");
  q.max_containers = limit_field<std::int64_t>(j, "max_containers");
  q.max_memory_bytes = limit_field<std::int64_t>(j, "max_memory_bytes");
  q.max_cpus = limit_field<double>(j, "max_cpus");
  q.max_gpu_hours = limit_field<double>(j, "max_gpu_hours");
  if (auto p = limit_field<double>(j, "period_hours"); p && *p > 0) q.period_hours = *p;
  return q;
}

Json QuotaLimits::to_json() const {
  return {
      {"max_gpus", or_null(max_gpus)},           {"max_containers", or_null(max_containers)},
      {"max_cpus", or_null(max_cpus)},           {"max_memory_bytes", or_null(max_memory_bytes)},
      {"max_gpu_hours", or_null(max_gpu_hours)}, {"period_hours", period_hours}};
}

Json QuotaUsage::to_json() const {
  return {{"gpus", gpus},
          {"containers", containers},
          {"cpus", cpus},
          {"memory_bytes", memory_bytes},
          {"gpu_hours", gpu_hours}};
}

QuotaLimits quota_limits(Store& store, const std::string& user) {
  return QuotaLimits::from_json(effective_policy(store, PolicyKind::kQuota, user));
}

QuotaUsage quota_usage(Service& s, const std::string& user, const QuotaLimits& limits,
                       std::int64_t except_id) {
  QuotaUsage u;
  for (const auto& c : s.store->containers(user)) {
    if (c.id == except_id) continue;
    u.gpus += static_cast<std::int64_t>(c.gpus.size());
    if (c.state == state::kLeased) continue;  // a lease holds GPUs, it is not a container here
    ++u.containers;
    u.cpus += c.spec.cpus.cpus();
    u.memory_bytes += c.spec.memory.bytes;
  }
  double now = s.clock->now();
  u.gpu_hours = gpu_seconds_since(*s.store, user, now - limits.period_hours * 3600) / 3600;
  return u;
}

void check_quota(Service& s, const std::string& user, const ContainerSpec& want, bool new_container,
                 std::int64_t except_id) {
  QuotaLimits q = quota_limits(*s.store, user);
  if (!q.max_gpus && !q.max_containers && !q.max_cpus && !q.max_memory_bytes && !q.max_gpu_hours)
    return;
  meter_tick(*s.store, s.clock->now());  // GPU-hours up to this moment
  QuotaUsage u = quota_usage(s, user, q, except_id);
  if (q.max_containers && new_container && u.containers + 1 > *q.max_containers)
    exceeded("containers", std::to_string(u.containers), "1", std::to_string(*q.max_containers),
             user);
  if (q.max_gpus && want.gpu_count > 0 && u.gpus + want.gpu_count > *q.max_gpus)
    exceeded("GPUs", std::to_string(u.gpus), std::to_string(want.gpu_count),
             std::to_string(*q.max_gpus), user);
  if (q.max_gpu_hours && want.gpu_count > 0 && u.gpu_hours >= *q.max_gpu_hours)
    exceeded("GPU-hours (last " + fmt_number(q.period_hours) + " h)", fmt_number(u.gpu_hours),
             std::to_string(want.gpu_count) + " GPU(s)", fmt_number(*q.max_gpu_hours), user);
  // Under a CPU or memory quota every container must say what it takes: no limit is unbounded.
  if (q.max_cpus) {
    if (!want.cpus.set())
      throw ApiError(ApiCode::kQuotaExceeded, "Quota for " + user + " limits CPUs: give \"cpus\"",
                     "in use " + fmt_number(u.cpus) + " of " + fmt_number(*q.max_cpus) + " CPUs");
    double asked = want.cpus.cpus();
    if (u.cpus + asked > *q.max_cpus + 1e-9)
      exceeded("CPUs", fmt_number(u.cpus), fmt_number(asked), fmt_number(*q.max_cpus), user);
  }
  if (q.max_memory_bytes) {
    if (!want.memory.set())
      throw ApiError(ApiCode::kQuotaExceeded,
                     "Quota for " + user + " limits memory: give \"memory\"",
                     "in use " + std::to_string(u.memory_bytes) + " of " +
                         std::to_string(*q.max_memory_bytes) + " bytes");
    std::int64_t asked = want.memory.bytes;
    if (u.memory_bytes + asked > *q.max_memory_bytes)
      exceeded("memory bytes", std::to_string(u.memory_bytes), std::to_string(asked),
               std::to_string(*q.max_memory_bytes), user);
  }
}

Json quota_json(Service& s, const std::string& user) {
  QuotaLimits q = quota_limits(*s.store, user);
  return {{"user", user}, {"limits", q.to_json()}, {"usage", quota_usage(s, user, q).to_json()}};
}

const RequestSchema& quota_schema() {
  static const RequestSchema s{
      "QuotaRequest",
      {{"user", FT::kString, true, "user name, or \"*\" for the default of everyone"},
       {"max_gpus", FT::kInteger, false, "GPUs held at once (-1: unlimited)"},
       {"max_containers", FT::kInteger, false, "containers at once (-1: unlimited)"},
       {"max_cpus", FT::kNumberOrString, false, "CPUs of all containers (\"unlimited\")"},
       {"max_memory", FT::kNumberOrString, false,
        "memory of all containers, e.g. \"64g\" (\"unlimited\")"},
       {"max_gpu_hours", FT::kNumberOrString, false,
        "GPU-hours held per rolling period (\"unlimited\")"},
       {"period_hours", FT::kNumberOrString, false, "the rolling period, hours (default 168)"},
       {"reset", FT::kBoolean, false, "forget the user's own limits first (back to the default)"}}};
  return s;
}

Json set_quota(Store& store, const Json& req) {
  const std::string user = policy_request_user(req);
  Json f = Json::object();
  for (const char* key : {"max_gpus", "max_containers"}) {
    if (!req.contains(key)) continue;
    auto n = req[key].get<std::int64_t>();
    if (n < -1 || n > 1000000)
      throw ApiError(ApiCode::kInvalidRequest, std::string(key) + " must be -1..1000000");
    f[key] = n;
  }
  if (req.contains("max_cpus"))
    f["max_cpus"] =
        unlimited(req["max_cpus"]) ? -1.0 : static_cast<double>(parse_cpus(req["max_cpus"])) / 1e9;
  if (req.contains("max_memory"))
    f["max_memory_bytes"] = unlimited(req["max_memory"])
                                ? std::int64_t(-1)
                                : parse_size(req["max_memory"], "max_memory");
  if (req.contains("max_gpu_hours"))
    f["max_gpu_hours"] =
        unlimited(req["max_gpu_hours"])
            ? -1.0
            : policy_number(req["max_gpu_hours"], "max_gpu_hours", 0, 1e9, kUnlimitedHint);
  if (req.contains("period_hours"))
    f["period_hours"] =
        policy_number(req["period_hours"], "period_hours", 0.01, 8760, kUnlimitedHint);
  return save_policy(store, PolicyKind::kQuota, user, f, req.value("reset", false));
}

}  // namespace gpulab::service
