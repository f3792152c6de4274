// Per-user policies with a default for everyone (user "*"): quota limits and the idle-reclaim
// policy, each a JSON object in the book; a user's fields override the default's one by one.
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "service/store/store.h"

namespace gpulab::service {

inline constexpr const char* kDefaultPolicyUser = "*";

enum class PolicyKind { kQuota, kIdle };

// The stored fields of `user` ("*": the default); {} when none are set.
Json load_policy(Store& store, PolicyKind kind, const std::string& user);
// Default's fields, then the user's over them.
Json effective_policy(Store& store, PolicyKind kind, const std::string& user);
// Merges `fields` into the user's stored object (reset: replace it with {}); returns the result.
Json save_policy(Store& store, PolicyKind kind, const std::string& user, const Json& fields,
                 bool reset);
// Users (and "*") with a stored policy of this kind.
std::vector<std::string> policy_users(Store& store, PolicyKind kind);

// "alice:max_gpus=3,max_memory=64g" (the CLI's form) -> ("alice", {"max_gpus":3,...}): integers,
// decimals and true/false become JSON numbers and booleans, the rest strings. INVALID_REQUEST
// when there is no "USER:" or a pair has no '='.
std::pair<std::string, Json> policy_from_text(const std::string& text);

}  // namespace gpulab::service
