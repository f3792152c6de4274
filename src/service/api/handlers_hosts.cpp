// Host endpoints for admins: every host's state, the retired hosts the book still holds rows on,
// and forgetting those rows (see ops/hosts/forget_host.h).
#include "service/api/handlers.h"
#include "service/ops/hosts/forget_host.h"

namespace gpulab::service {

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

// Admins only, as a whole: the retired hosts' rows name other users' containers and owners.
ApiReply hosts(Service& s, Who who) {
  require_admin(who);
  Json retired = Json::array();
  for (const auto& r : survey_retired_hosts(s)) retired.push_back(r.summary_json());
  return ApiReply::ok("Hosts retrieved successfully",
                      {{"hosts", host_states(s)}, {"retired", retired}});
}

ApiReply forget(Service& s, Req req, Who who) {
  // Before the body is read: a non-admin learns nothing of the book, not even whether a host
  // of that name has rows.
  require_admin(who);
  Json j = parse_request(req.body, forget_host_schema());
  ForgetReport r =
      forget_host(s, j["name"].get<std::string>(), j.value("dry_run", false), who.user);
  return ApiReply::ok(r.message(), r.to_json());
}

}  // namespace

void add_host_routes(Router& r, Service& s) {
  Service* sp = &s;
  r.add({.method = "GET",
         .path = std::string(kApiBase) + "/hosts",
         .handler = [sp](Req, Who w) { return hosts(*sp, w); },
         .summary = "Every configured host's state (down reason, GPUs and where they come from, "
                    "GPU probe) and the hosts outside the config that still have rows in the "
                    "book (containers, leases, GPUs, ports, owners); admins only",
         .tag = "system"});
  r.add({.method = "POST",
         .path = std::string(kApiBase) + "/hosts/forget",
         .handler = [sp](Req q, Who w) { return forget(*sp, q, w); },
         .summary = "Forget a host taken out of the config for good: its containers' and leases' "
                    "rows go and their GPUs, ports and quota usage are released, without "
                    "contacting its engine; admins only",
         .tag = "system",
         .schema = &forget_host_schema()});
}

}  // namespace gpulab::service
