// A file mapped into memory copy-on-write: its bytes without reading them all (pages come from
// the page cache as they are touched, and are shared with every process mapping the same file),
// writable without changing the file. What lets a rank take its share of a weights file larger
// than its memory. The file must not shrink while mapped (a read past its end is SIGBUS): files
// written atomically (a new file renamed over the old) are safe, the old one staying mapped.
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
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gpulab
