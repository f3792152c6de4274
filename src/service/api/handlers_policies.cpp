// Quota and idle-policy endpoints: admins set them (per user or "*" for everyone), everyone
// reads their own limits and usage.
#include <set>

#include "service/api/handlers.h"
#include "service/base/api_error.h"
#include "service/ops/policies/idle_reclaim.h"
#include "service/ops/policies/quota.h"
#include "service/store/user_policy.h"

namespace gpulab::service {

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

void require_admin(Who who, const char* what) {
  if (!who.admin)
    throw ApiError(ApiCode::kForbidden, std::string("Admins only: ") + what,
                   "GET shows your own; ask an admin to change it");
}

// Everyone the admin view lists: users, owners of containers, users with a stored policy.
std::set<std::string> known_users(Service& s) {
  std::set<std::string> names;
  for (const auto& u : s.store->users()) names.insert(u.name);
  for (const auto& c : s.store->containers()) names.insert(c.owner);
  for (auto kind : {PolicyKind::kQuota, PolicyKind::kIdle})
    for (const auto& u : policy_users(*s.store, kind))
      if (u != kDefaultPolicyUser) names.insert(u);
  return names;
}

ApiReply get_quotas(Service& s, Who who) {
  if (!who.admin) return ApiReply::ok("Quota retrieved successfully", quota_json(s, who.user));
  Json users = Json::array();
  for (const auto& u : known_users(s)) users.push_back(quota_json(s, u));
  return ApiReply::ok("Quotas retrieved successfully",
                      {{"default", QuotaLimits::from_json(load_policy(*s.store, PolicyKind::kQuota,
                                                                      kDefaultPolicyUser))
                                       .to_json()},
                       {"users", users}});
}

ApiReply post_quota(Service& s, Req req, Who who) {
  require_admin(who, "setting quotas");
  Json j = parse_request(req.body, quota_schema());
  Json stored = set_quota(*s.store, j);
  std::string user = j["user"].get<std::string>();
  s.store->audit(who.user, "set-quota", user, "ok", stored.dump());
  Json d = {{"user", user}, {"stored", stored}};
  if (user != kDefaultPolicyUser) d = quota_json(s, user);
  return ApiReply::ok("Quota updated", d);
}

ApiReply get_idle(Service& s, Who who) {
  if (!who.admin)
    return ApiReply::ok(
        "Idle policy retrieved successfully",
        {{"user", who.user}, {"policy", idle_policy(*s.store, who.user).to_json()}});
  Json users = Json::array();
  for (const auto& u : known_users(s))
    users.push_back({{"user", u}, {"policy", idle_policy(*s.store, u).to_json()}});
  return ApiReply::ok("Idle policies retrieved successfully",
                      {{"default", idle_policy(*s.store, kDefaultPolicyUser).to_json()},
                       {"check_interval_seconds", s.config.idle_check_interval_seconds},
                       {"users", users}});
}

ApiReply post_idle(Service& s, Req req, Who who) {
  require_admin(who, "setting idle policies");
  Json j = parse_request(req.body, idle_policy_schema());
  Json stored = set_idle_policy(*s.store, j);
  std::string user = j["user"].get<std::string>();
  s.store->audit(who.user, "set-idle-policy", user, "ok", stored.dump());
  return ApiReply::ok(
      "Idle policy updated",
      {{"user", user}, {"stored", stored}, {"policy", idle_policy(*s.store, user).to_json()}});
}

}  // namespace

void add_policy_routes(Router& r, Service& s) {
  Service* sp = &s;
  const std::string b = kApiBase;
  r.add({.method = "GET",
         .path = b + "/quotas",
         .handler = [sp](Req, Who w) { return get_quotas(*sp, w); },
         .summary = "Your quota limits and usage (admins: the default and every user's)",
         .tag = "quotas"});
  r.add({.method = "POST",
         .path = b + "/quotas",
         .handler = [sp](Req q, Who w) { return post_quota(*sp, q, w); },
         .summary = "Set a user's quota, or the default (\"*\"); admins only",
         .tag = "quotas",
         .schema = &quota_schema()});
  r.add({.method = "GET",
         .path = b + "/idle-policy",
         .handler = [sp](Req, Who w) { return get_idle(*sp, w); },
         .summary = "Your idle-reclaim policy (admins: the default and every user's)",
         .tag = "quotas"});
  r.add({.method = "POST",
         .path = b + "/idle-policy",
         .handler = [sp](Req q, Who w) { return post_idle(*sp, q, w); },
         .summary = "Set a user's idle-reclaim policy, or the default (\"*\"); admins only",
         .tag = "quotas",
         .schema = &idle_policy_schema()});
}

}  // namespace gpulab::service
