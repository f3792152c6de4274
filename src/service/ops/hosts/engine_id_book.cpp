// The engine-ID book (engine_id_book.h).
#include "service/ops/hosts/engine_id_book.h"

#include "core/log.h"

namespace gpulab::service {

Status EngineIdBook::admit(const std::string& host, const Engine& engine, bool log) {
  auto id = engine.engine_id();  // cached by the engine after its first answer
  if (!id || id->empty()) return ok_status();
  std::lock_guard<std::mutex> g(mu_);
  auto [it, fresh] = host_of_id_.emplace(*id, host);
  if (fresh || it->second == host) return ok_status();
  Error e(Code::kInvalidArgument,
          "config: hosts '" + it->second + "' and '" + host + "' are the same Docker engine (ID " +
              *id + ")",
          "list each engine once in hosts (docs/engines.md#many-hosts)");
  if (log && refused_.insert(host).second)
    spdlog::error("host {} stays down: {} ({})", host, e.message, e.hint);
  return e;
}

}  // namespace gpulab::service
