// Result<T>: a value or an Error, for failures a caller is expected to handle (tier 2).
#pragma once

#include <utility>
#include <variant>

#include "core/error.h"

namespace gpulab {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  Result(Code code, std::string msg, std::string hint = {})
      : v_(Error{code, std::move(msg), std::move(hint)}) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    check();
    return std::get<0>(v_);
  }
  T& value() & {
    check();
    return std::get<0>(v_);
  }
  T&& value() && {
    check();
    return std::get<0>(std::move(v_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const Error& error() const {
    GPULAB_ASSERT(!ok(), "error() on a successful Result");
    return std::get<1>(v_);
  }
  T value_or(T fallback) const { return ok() ? std::get<0>(v_) : std::move(fallback); }
  // Turns an expected failure into a run-ending one (tier 2 -> tier 3).
  T value_or_throw() && {
    if (!ok()) throw Exception(std::get<1>(v_));
    return std::get<0>(std::move(v_));
  }

 private:
  void check() const {
    if (!ok()) throw Exception(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
};

// For operations that return nothing on success.
struct Unit {};
using Status = Result<Unit>;
inline Status ok_status() {
  return Unit{};
}

}  // namespace gpulab
