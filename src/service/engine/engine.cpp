// The engine seam's one shared rule: a backend without snapshots says so in the same words for
// every caller.
#include "service/engine/engine.h"

namespace gpulab::service {

Result<const EngineArchives*> archives_of(const Engine& engine, const std::string& what) {
  if (const EngineArchives* a = engine.archives()) return a;
  return Error(Code::kUnsupported,
               "this lab's container engine (" + engine.describe() +
                   ") keeps no snapshots or image archives, so " + what + " cannot be done there",
               "run " + what + " on a host whose engine has them (Docker does; docs/engines.md)");
}

}  // namespace gpulab::service
