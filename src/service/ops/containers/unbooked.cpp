// Removal of unbooked containers (unbooked.h), shared by create and the reconciler.
#include "service/ops/containers/unbooked.h"

#include "core/log.h"
#include "service/store/book_id.h"

namespace gpulab::service {

bool remove_unbooked_container(Service& s, const Engine& engine, const std::string& name,
                               const std::string& id,
                               const std::map<std::string, std::string>& labels) {
  if (!made_by_this_book(*s.store, labels) || labels.count(kLeaseLabel)) return false;
  auto st = engine.remove_container(id);
  if (!st && st.error().code != Code::kNotFound) {
    // The next pass tries again; a create of that name meets the engine's own conflict.
    spdlog::error("removing {}, made by this service without a row: {}", name,
                  st.error().to_string());
    return true;
  }
  s.store->audit("gpulab", "reconcile", name, "removed", "container without a row in the book");
  return true;
}

}  // namespace gpulab::service
