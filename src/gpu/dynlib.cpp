// dlopen/dlsym wrapper for the vendor libraries (NVML, ROCm SMI); see dynlib.h.
#include "gpu/dynlib.h"

#include <dlfcn.h>

#include "core/strings.h"

namespace gpulab::gpu {

void DlClose::operator()(void* handle) const {
  if (handle != nullptr) ::dlclose(handle);
}

bool DynLib::open(const std::vector<std::string>& names) {
  handle_.reset();
  name_.clear();
  std::string first;  // the preferred name's failure says the most
  for (const auto& n : names) {
    void* h = ::dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) {
      handle_.reset(h);
      name_ = n;
      error_.clear();
      return true;
    }
    const char* e = ::dlerror();
    if (first.empty()) first = e != nullptr ? e : "unknown dlopen error";
  }
  error_ = "cannot load " + join(names, " or ") + " (" + first + ")";
  return false;
}

void* DynLib::symbol(const std::vector<const char*>& names) const {
  if (!handle_) return nullptr;
  for (const char* n : names) {
    ::dlerror();
    void* p = ::dlsym(handle_.get(), n);
    if (p != nullptr) return p;
  }
  return nullptr;
}

}  // namespace gpulab::gpu
