// Engine containers this service made but has no row for (a create cut off by a crash, or one
// the engine finished after a crash rolled its row back): how they are recognised and removed.
#pragma once

#include <map>
#include <string>

#include "service/ops/service.h"

namespace gpulab::service {

// An engine container this book made (its gpulab.book label) that has no row and is not a lease's:
// removed, with an audit line (a failed removal is logged; the next pass tries again). False
// (nothing done) for another service's or an unlabelled one. Never throws.
// The caller holds the name's lock and has checked that no row exists.
bool remove_unbooked_container(Service& s, const Engine& engine, const std::string& name,
                               const std::string& id,
                               const std::map<std::string, std::string>& labels);

}  // namespace gpulab::service
