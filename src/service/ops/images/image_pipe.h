// A bounded pipe in memory between one engine's image save (the writer, pushing pieces) and
// another engine's image load (the reader, pulling): a move's image crosses the service with at
// most `capacity` bytes held at once and never touches the service's disk.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpulab::service {

class ImagePipe {
 public:
  explicit ImagePipe(std::size_t capacity) : capacity_(capacity) {}

  // Writer: blocks while the pipe is full; false once the reader has gone (the load stopped).
  bool write(std::string_view data);
  // Writer: the end of the archive (ok) or why the save failed (the reader then gets it).
  void close_write(const Status& why);

  // Reader: blocks until data or the end; 0 at a clean end, the writer's error after a failed
  // save.
  Result<std::size_t> read(char* buf, std::size_t cap);
  // Reader: the load has ended (done or failed): writes fail from now on.
  void close_read();

  // Whether the reader went before the writer ended: the load, not the save, failed first.
  bool reader_went_first() const;
  std::int64_t bytes() const;  // passed through so far

 private:
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> pieces_;
  std::size_t held_ = 0, front_offset_ = 0;
  std::int64_t bytes_ = 0;
  bool write_closed_ = false, read_closed_ = false, reader_first_ = false;
  Status write_status_ = ok_status();
};

}  // namespace gpulab::service
