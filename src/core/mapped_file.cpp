// Copy-on-write file mappings (see mapped_file.h).
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace gpulab {
namespace {

// The live mappings a signal handler may ask about: a slot is claimed, filled, then published by
// its start address; a reader sees a slot only once published.
struct Slot {
  std::atomic<bool> claimed{false};
  std::atomic<std::uintptr_t> start{0};
  std::atomic<size_t> size{0};
  char path[256] = {};
};
constexpr int kSlots = 64;
Slot g_slots[kSlots];

int publish(const void* data, size_t size, const std::string& path) {
  for (int i = 0; i < kSlots; ++i) {
    bool free = false;
    if (!g_slots[i].claimed.compare_exchange_strong(free, true)) continue;
    const size_t n = std::min(path.size(), sizeof g_slots[i].path - 1);
    std::memcpy(g_slots[i].path, path.data(), n);
    g_slots[i].path[n] = '\0';
    g_slots[i].size.store(size, std::memory_order_relaxed);
    g_slots[i].start.store(reinterpret_cast<std::uintptr_t>(data), std::memory_order_release);
    return i;
  }
  return -1;
}

void withdraw(int slot) {
  if (slot < 0) return;
  g_slots[slot].start.store(0, std::memory_order_release);
  g_slots[slot].claimed.store(false, std::memory_order_release);
}

}  // namespace

bool mapped_file_at(const void* addr, MappedAt& out) {
  const auto a = reinterpret_cast<std::uintptr_t>(addr);
  for (const Slot& s : g_slots) {
    const std::uintptr_t start = s.start.load(std::memory_order_acquire);
    const size_t size = s.size.load(std::memory_order_relaxed);
    if (start == 0 || a < start || a - start >= size) continue;
    out = {s.path, a - start, size};
    return true;
  }
  return false;
}

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error{Code::kNotFound, "cannot open " + path.string() + ": " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{Code::kNotFound, path.string() + " is not a regular file"};
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* p = nullptr;
  if (size > 0) {
    // Private and writable, so the bytes can back tensors a caller may change in place; no swap
    // is reserved for the copies (a mapping larger than RAM is then still allowed).
    p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Error{Code::kUnavailable, "cannot map " + path.string() + ": " + std::strerror(err)};
    }
  }
  ::close(fd);  // the mapping keeps the file open
  const int slot = size > 0 ? publish(p, size, path.string()) : -1;
  return std::shared_ptr<MappedFile>(new MappedFile(p, size, slot));
}

MappedFile::~MappedFile() {
  withdraw(slot_);
  if (data_) ::munmap(data_, size_);
}

}  // namespace gpulab
