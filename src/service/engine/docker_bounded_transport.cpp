// The bounded waits of docker_bounded_transport.h.
#include "service/engine/docker_bounded_transport.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string_view>

namespace gpulab::service {

namespace {

// Whether the request is the engine's ping (versioned or not): the host monitor's question.
bool is_ping(const docker::HttpRequest& r) {
  const std::string& t = r.target;
  return t == "/_ping" || (t.size() > 6 && t.compare(t.size() - 6, 6, "/_ping") == 0);
}

}  // namespace

Result<docker::HttpResponse> BoundedTransport::send(const docker::HttpRequest& request) {
  docker::HttpRequest r = request;
  r.connect_timeout = std::min(r.connect_timeout, budget_);
  if (is_ping(r)) r.timeout = r.timeout.count() > 0 ? std::min(r.timeout, budget_) : budget_;
  // An answer collected in memory is capped: a peer that answers without end (not an engine, or
  // a broken one) cannot exhaust the service's memory. Streams (files, sinks) are the caller's.
  std::shared_ptr<std::string> collected;
  if (!r.on_data && r.response_file.empty()) {
    collected = std::make_shared<std::string>();
    r.on_data = [collected](std::string_view piece) {
      if (collected->size() + piece.size() > kMaxAnswerBytes) return false;
      collected->append(piece);
      return true;
    };
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto out = inner_->send(r);
  if (!out && out.error().message.find(docker::kAbandonedCallWords) != std::string::npos)
    return Error(out.error().code, "host '" + host_ + "': " + out.error().message,
                 out.error().hint);
  if (out && collected && out->status >= 200 && out->status < 300) {
    if (out->cancelled && !(request.cancel && request.cancel->load()))
      return Error(Code::kUnavailable,
                   "host '" + host_ + "': its Docker engine at " + inner_->describe() +
                       " answered with more than " + std::to_string(kMaxAnswerBytes >> 20) +
                       " MiB: it is not a Docker engine, or a broken one",
                   "check that the host's url names its dockerd's TCP port");
    out->body = std::move(*collected);  // the sink had it (an error status is collected as is)
  }
  if (out || out.error().code != Code::kTimeout) return out;
  // Our bound fired (not the request's own limit): the engine did not take the connection or
  // did not answer its ping in time. A hung engine: the host monitor marks it down.
  const auto took = std::chrono::steady_clock::now() - t0;
  const bool own_limit = request.timeout.count() > 0 && took >= request.timeout;
  if (own_limit && !is_ping(r)) return out;
  const auto secs = std::chrono::duration<double>(budget_).count();
  char budget[32];
  std::snprintf(budget, sizeof budget, "%g", secs);
  Error hung(Code::kUnavailable,
             "host '" + host_ + "': its Docker engine at " + inner_->describe() +
                 " did not answer within " + budget +
                 " s (host_answer_seconds): it is hung or overloaded",
             "see the engine's log on that host (journalctl -u docker); a dockerd stopped by a "
             "signal or a debugger answers again once resumed");
  if (on_hung_) on_hung_(hung.message);
  return hung;
}

}  // namespace gpulab::service
