// The HTTP/1.1 server (Boost.Beast): keep-alive, limits on header and body size, read and idle
// timeouts, streamed uploads to disk and streamed file downloads. Handlers run on a worker pool,
// so a slow engine call (a backup) never holds the I/O threads or other requests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "service/base/config.h"
#include "service/http/router.h"

namespace gpulab::service {

class HttpServer {
 public:
  HttpServer(const ServiceConfig& config, const Router& router);
  ~HttpServer();
  // Binds and listens on config.listen_host:listen_port (port 0: any free port).
  Status listen();
  uint16_t port() const;
  // Serves until stop() (or SIGINT/SIGTERM when handle_signals).
  void run(bool handle_signals);
  void stop();

  struct Impl;  // public so the session type in the .cpp can name it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpulab::service
