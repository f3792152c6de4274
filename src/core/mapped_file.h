// A file mapped into memory copy-on-write: its bytes without reading them all (pages come from
// the page cache as they are touched, and are shared with every process mapping the same file),
// writable without changing the file. What lets a rank take its share of a weights file larger
// than its memory. The file must not shrink while mapped (a read past its end is SIGBUS): files
// written atomically (a new file renamed over the old) are safe, the old one staying mapped; one
// truncated from outside ends gpulab with an error naming it (crash_report.cpp asks
// mapped_file_at), not a crash report.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string_view>

#include "core/result.h"

namespace gpulab {

class MappedFile {
 public:
  // kNotFound when it cannot be opened; kUnavailable when it cannot be mapped (the caller may
  // read it instead). An empty file maps to no bytes.
  static Result<std::shared_ptr<MappedFile>> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Writable (a caller may cast the const away): a write copies that page for this process alone.
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  MappedFile(void* data, size_t size, int slot) : data_(data), size_(size), slot_(slot) {}
  void* data_ = nullptr;
  size_t size_ = 0;
  int slot_ = -1;  // in the table mapped_file_at reads; -1 when it was full
};

// Where a fault address falls in a live MappedFile (the file's path, truncated to 255 bytes).
struct MappedAt {
  const char* path = nullptr;
  size_t offset = 0;
  size_t size = 0;
};

// Async-signal-safe (no locks, no allocation): for a SIGBUS handler. False when no MappedFile
// (of the first 64 live at once) holds ADDR.
bool mapped_file_at(const void* addr, MappedAt& out);

}  // namespace gpulab
