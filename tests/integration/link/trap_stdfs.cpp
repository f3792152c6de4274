// A stand-in for a libtorch.so that exports its own std::filesystem functions (as the PyTorch
// wheel's does): a caller bound to this copy aborts, so the link-order test sees which one won.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

// What the probe needs from this library for its own sake, as gpulab needs libtorch's tensors.
extern "C" int gpulab_trap_anchor() {
  return 42;
}

namespace std::filesystem {

std::uintmax_t remove_all(const path& p) {
  std::fprintf(stderr, "TRAP: remove_all(%s) bound to the stand-in library\n", p.c_str());
  std::abort();
}

std::uintmax_t remove_all(const path& p, std::error_code& ec) {
  ec.clear();
  return remove_all(p);
}

}  // namespace std::filesystem
