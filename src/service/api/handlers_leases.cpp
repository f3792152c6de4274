// Lease endpoints: book GPUs and an SSH port for a container made outside the service (gpulab
// ddp), list leases, release one. See lease_ops.h.
#include "service/api/handlers.h"
#include "service/base/api_error.h"
#include "service/domain/validation.h"
#include "service/ops/leases/lease_ops.h"

namespace gpulab::service {

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

ApiReply lease_create(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, lease_schema());
  LeaseRequest r;
  r.name = j["name"].get<std::string>();
  r.owner = who.user;
  r.gpu_count = j.value("gpu_count", 0);
  r.ssh_port = j.value("ssh_port", true);
  r.host = j.value("host", std::string());
  auto out = create_lease(s, r);
  return ApiReply::ok("Lease created successfully", lease_json(s, out.record, nullptr, &out.gpus));
}

ApiReply lease_list(Service& s, Who who) {
  auto bound = lease_containers(s);
  Json a = Json::array();
  for (const auto& c : s.store->containers(who.admin ? std::nullopt : std::optional(who.user))) {
    if (!is_lease(c)) continue;
    auto it = bound.find(c.name);
    a.push_back(lease_json(s, c, it == bound.end() ? nullptr : &it->second));
  }
  return ApiReply::ok("Leases retrieved successfully", {{"leases", a}, {"total", a.size()}});
}

ApiReply lease_release(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, name_schema());
  ContainerRecord c = require_lease(s, who, j["name"].get<std::string>());
  auto lock = s.lock_container(c.name);
  release_lease(s, c);
  s.store->audit(who.user, "release", c.name, "ok");
  return ApiReply::ok("Lease released successfully", {{"name", c.name}});
}

}  // namespace

void add_lease_routes(Router& r, Service& s) {
  const std::string b = kApiBase;
  Service* sp = &s;
  r.add({.method = "POST",
         .path = b + "/leases",
         .handler = [sp](Req q, Who w) { return lease_create(*sp, q, w); },
         .summary =
             "Book GPUs and an SSH port for a container you create yourself on the same engine "
             "(gpulab ddp); label it gpulab.lease=<name>",
         .tag = "leases",
         .schema = &lease_schema()});
  r.add({.method = "GET",
         .path = b + "/leases",
         .handler = [sp](Req, Who w) { return lease_list(*sp, w); },
         .summary = "List your leases (admins: all) and the container using each",
         .tag = "leases"});
  r.add({.method = "POST",
         .path = b + "/leases/release",
         .handler = [sp](Req q, Who w) { return lease_release(*sp, q, w); },
         .summary = "Release a lease once its container is removed",
         .tag = "leases",
         .schema = &name_schema()});
}

}  // namespace gpulab::service
