// Registers the API's routes, by area, under /api/v1/gpu-docker/ (the seed's paths).
#pragma once

#include <set>
#include <string>

#include "service/http/router.h"
#include "service/ops/service.h"

namespace gpulab::service {

inline constexpr const char* kApiBase = "/api/v1/gpu-docker";

void add_container_routes(Router& router,
                          Service& s);               // status, create, list, lifecycle, logs, stats
void add_image_routes(Router& router, Service& s);   // snapshots and backups
void add_system_routes(Router& router, Service& s);  // gpus, metrics, openapi, users, audit, health
void add_lease_routes(Router& router, Service& s);   // GPU leases for gpulab ddp
void add_policy_routes(Router& router, Service& s);  // quotas and idle-reclaim policies
void add_host_routes(Router& router, Service& s);    // admins: hosts view, forget a host

// 403 FORBIDDEN "Admins only" for a caller who is not an admin.
void require_admin(const Principal& who);

// Each configured host's name and state as the host monitor last saw it (down reason, engine id,
// GPU count and source, GPU probe): /healthz, /readyz, /gpus and the admins' hosts view.
Json host_states(const Service& s);

// The containers `who` may see by name (all for admins): per-user views show no other names.
std::set<std::string> visible_container_names(Service& s, const Principal& who);

// Reads a required query parameter or throws INVALID_REQUEST.
std::string query_param(const ApiRequest& req, const std::string& key);

// The answer for a new container (create, restore-snapshot, restore).
Json created_json(const struct CreateOutcome& out, const Service& s);

}  // namespace gpulab::service
