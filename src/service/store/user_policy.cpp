// Policy rows (user_policies table) and the CLI's "USER:key=value,..." form.
#include "service/store/user_policy.h"

#include <cstdlib>

#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"

namespace gpulab::service {

namespace {

const char* column(PolicyKind k) {
  return k == PolicyKind::kQuota ? "quota" : "idle";
}

Json parse_or_empty(const std::string& text) {
  Json j = Json::parse(text, nullptr, false);
  return j.is_object() ? j : Json::object();
}

}  // namespace

Json load_policy(Store& store, PolicyKind kind, const std::string& user) {
  auto rows = store.db().query(
      std::string("SELECT ") + column(kind) + " FROM user_policies WHERE user=?", {user});
  return rows.empty() ? Json::object() : parse_or_empty(rows[0].str(0));
}

Json effective_policy(Store& store, PolicyKind kind, const std::string& user) {
  Json j = load_policy(store, kind, kDefaultPolicyUser);
  if (user != kDefaultPolicyUser) j.update(load_policy(store, kind, user));
  return j;
}

Json save_policy(Store& store, PolicyKind kind, const std::string& user, const Json& fields,
                 bool reset) {
  return store.transaction([&] {
    Json j = reset ? Json::object() : load_policy(store, kind, user);
    j.update(fields);
    const std::string col = column(kind);
    store.db().exec("INSERT INTO user_policies(user," + col +
                        ",updated_at) VALUES(?,?,?) ON CONFLICT(user) DO UPDATE SET " + col +
                        "=excluded." + col + ",updated_at=excluded.updated_at",
                    {user, j.dump(), iso_now()});
    return j;
  });
}

std::vector<std::string> policy_users(Store& store, PolicyKind kind) {
  std::vector<std::string> v;
  for (const auto& r : store.db().query(std::string("SELECT user FROM user_policies WHERE ") +
                                        column(kind) + "<>'{}' ORDER BY user"))
    v.push_back(r.str(0));
  return v;
}

std::pair<std::string, Json> policy_from_text(const std::string& text) {
  auto colon = text.find(':');
  if (colon == std::string::npos || colon == 0)
    throw ApiError(ApiCode::kInvalidRequest, "expected USER:key=value,... got '" + text + "'",
                   "e.g. alice:max_gpus=2,max_memory=64g (USER * is the default for everyone)");
  std::string user = text.substr(0, colon);
  Json fields = Json::object();
  for (const auto& pair : split(text.substr(colon + 1), ',')) {
    if (pair.empty()) continue;
    auto eq = pair.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ApiError(ApiCode::kInvalidRequest, "expected key=value, got '" + pair + "'");
    std::string key = pair.substr(0, eq), value = pair.substr(eq + 1);
    char* end = nullptr;
    long long i = std::strtoll(value.c_str(), &end, 10);
    if (!value.empty() && end && *end == '\0') {
      fields[key] = i;
      continue;
    }
    double d = std::strtod(value.c_str(), &end);
    if (!value.empty() && end && *end == '\0') {
      fields[key] = d;
    } else if (value == "true" || value == "false") {
      fields[key] = value == "true";
    } else {
      fields[key] = value;
    }
  }
  return {user, fields};
}

}  // namespace gpulab::service
