// Which book made an engine container: a random id kept in the book and put on every container
// the service creates ("gpulab.book" label), so the reconciler can tell its own orphans (a create
// that finished on the engine after the service died and rolled it back) from another service's
// containers on a shared engine.
#pragma once

#include <map>
#include <string>

#include "service/store/store.h"

namespace gpulab::service {

inline constexpr const char* kBookLabel = "gpulab.book";

// The book's id, made on first use.
std::string book_id(Store& store);

// Whether an engine container's labels say this book made it.
bool made_by_this_book(Store& store, const std::map<std::string, std::string>& labels);

}  // namespace gpulab::service
