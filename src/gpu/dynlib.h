// dlopen discipline for vendor libraries: try names in order, hold the handle in a unique_ptr
// whose deleter calls dlclose, look symbols up by versioned names, and keep why it failed.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gpulab::gpu {

struct DlClose {
  void operator()(void* handle) const;
};
using DlHandle = std::unique_ptr<void, DlClose>;

class DynLib {
 public:
  // Tries each name with dlopen(RTLD_NOW | RTLD_LOCAL); the first that loads wins. On failure
  // error() lists every name tried and dlerror()'s answer for the first one.
  bool open(const std::vector<std::string>& names);
  bool loaded() const { return handle_ != nullptr; }
  const std::string& loaded_name() const { return name_; }
  const std::string& error() const { return error_; }

  // The first of `names` the library exports (e.g. {"nvmlInit_v2", "nvmlInit"}), or nullptr.
  void* symbol(const std::vector<const char*>& names) const;

  // Typed lookup: sets `fn` and returns whether it was found.
  template <typename Fn>
  bool bind(Fn& fn, const std::vector<const char*>& names) const {
    fn = reinterpret_cast<Fn>(symbol(names));
    return fn != nullptr;
  }

 private:
  DlHandle handle_;
  std::string name_;
  std::string error_;
};

}  // namespace gpulab::gpu
