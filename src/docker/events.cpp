// The engine's event stream (GET /events): filtered, parsed into Event, stopped by the callback,
// a cancel flag or the filter's `until` time.
#include "docker/client.h"
#include "docker/client_internal.h"

namespace gpulab::docker {

namespace detail {

Event parse_event(Json j) {
  Event e;
  e.type = str(j, "Type");
  e.action = str(j, "Action", str(j, "status"));
  const Json& actor = child(j, "Actor");
  e.actor_id = str(actor, "ID", str(j, "id"));
  e.attributes = string_map(actor, "Attributes");
  e.time = num(j, "time");
  e.time_nano = num(j, "timeNano");
  e.raw = std::move(j);
  return e;
}

}  // namespace detail

Status Client::events(const EventFilter& filter, const std::function<bool(const Event&)>& on_event,
                      const std::atomic<bool>* cancel) const {
  std::string f = detail::filters({{"type", filter.types},
                                   {"container", filter.containers},
                                   {"event", filter.events},
                                   {"label", filter.labels}});
  detail::Query q;
  if (filter.since > 0) q.add("since", static_cast<long long>(filter.since));
  if (filter.until > 0) q.add("until", static_cast<long long>(filter.until));
  q.add("filters", f);
  bool stop = false;
  detail::JsonLines lines([&](const Json& j) {
    if (!stop && !on_event(detail::parse_event(j))) stop = true;
  });
  HttpRequest r;
  r.target = path("/events" + q.str());
  r.cancel = cancel;
  r.on_data = [&](std::string_view chunk) {
    lines.feed(chunk);
    return !stop;
  };
  auto resp = detail::call(*transport_, r, "follow Docker engine events");
  if (!resp.ok()) return resp.error();
  if (!resp->cancelled) lines.finish();
  return ok_status();
}

}  // namespace gpulab::docker
