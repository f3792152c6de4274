// libFuzzer target over the service's request path, in process: bytes -> Beast's request parser
// (header limits as the server sets them) -> request_from_header -> Router::dispatch over every
// API route of a service without an engine (so validation and schema checks run, and whatever
// passes them ends in ENGINE_UNAVAILABLE). Every JSON answer must be a strict-UTF-8 envelope.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "service/app/server.h"
#include "service/http/http_request.h"
#include "service/http/router.h"
#include "service/ops/service.h"

namespace {

namespace http = boost::beast::http;
using namespace gpulab;
using namespace gpulab::service;

struct Fixture {
  Service s;
  std::unique_ptr<Router> router;
  Fixture() {
    auto store = Store::open(":memory:");
    if (!store) std::abort();
    s.store = std::move(*store);
    s.config.backup_dir = (std::filesystem::temp_directory_path() / "gpulab-fuzz-backups").string();
    // One host that never connects, with two declared GPUs so allocation runs before the
    // missing engine is noticed (declared: no live sampling, the GPUs are not on this host).
    HostConfig host;
    host.name = "local";
    for (int i = 0; i < 2; ++i) {
      GpuSlot g;
      g.uuid = "GPU-fuzz-" + std::to_string(i);
      g.index = i;
      g.vendor = "nvidia";
      g.host = host.name;
      host.gpus.push_back(g);
    }
    s.hosts.push_back(std::make_unique<Host>(host, s.config));
    s.auth = std::make_unique<Auth>(*s.store, false);
    router = std::make_unique<Router>(*s.auth, &s.metrics);
    add_routes(*router, s);
  }
};

[[noreturn]] void fail(const char* what, const ApiReply& r) {
  std::fprintf(stderr, "request fuzz: %s (status %d): %.400s\n", what, r.status, r.body.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Fixture* fx = new Fixture();  // one service for the whole run, as in production
  http::request_parser<http::string_body> parser;
  parser.header_limit(64 * 1024);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  std::size_t used = parser.put(boost::asio::buffer(data, size), ec);
  if (!ec && !parser.is_done() && used == size) parser.put_eof(ec);
  if (ec || !parser.is_done()) {
    // What the server answers for bytes that are not HTTP: must serialize like any other.
    ApiReply r = Router::error(ApiCode::kInvalidRequest, "Malformed HTTP request: " + ec.message());
    if (r.status != 400) fail("malformed-request reply", r);
    return 0;
  }
  ApiRequest req = request_from_header(parser.get().base());
  req.body = parser.get().body();
  ApiReply r = fx->router->dispatch(std::move(req));
  if (r.content_type != "application/json") return 0;  // /metrics: Prometheus text
  gpulab::Json j = gpulab::Json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("openapi")) return 0;  // the OpenAPI document itself
  if (!j.is_object() || !j.contains("success") || !j["success"].is_boolean())
    fail("answer is not a JSON envelope", r);
  if (!j["success"].get<bool>()) {
    if (r.status < 400 || !j["error_code"].is_string() || !j["message"].is_string())
      fail("error answer without status >= 400, error_code and message", r);
    if (r.status >= 500 && j["error_code"] != "ENGINE_UNAVAILABLE")
      fail("server error other than the missing engine", r);
  }
  return 0;
}
