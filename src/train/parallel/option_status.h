// The Status a model-parallel option check returns: a refusal (kInvalidArgument, message and
// hint), and a check written to throw gpulab::Exception turned into one (tp_options,
// pipeline_options).
#pragma once

#include <string>
#include <utility>

#include "core/error.h"
#include "core/result.h"

namespace gpulab::train::parallel {

inline Status refuse(std::string message, std::string hint) {
  return Error{Code::kInvalidArgument, std::move(message), std::move(hint)};
}

template <class F>
Status as_status(F&& check) {
  try {
    check();
  } catch (const Exception& e) {
    return refuse(e.error().message, e.error().hint);
  }
  return ok_status();
}

}  // namespace gpulab::train::parallel
