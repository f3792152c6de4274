// Host endpoints for admins: forgetting the rows of a host that left the config for good (see
// ops/forget_host.h).
#include "service/api/handlers.h"
#include "service/ops/forget_host.h"

namespace gpulab::service {

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

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
