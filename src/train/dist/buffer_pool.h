// A few freed flat buffers kept for the next all-gather of the same size. ZeRO-3 frees a unit
// and allocates the next one's buffer a moment later; on the CPU fresh memory of that size comes
// from the kernel page by page (a fault and a zeroed page per 4 KiB), about 4.5 % of the perf
// samples of a llama-125m step on 2 ranks. GPU allocators cache blocks themselves: CPU only.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <cstdint>
#include <deque>

namespace gpulab::train::dist {

class BufferPool {
 public:
  explicit BufferPool(size_t capacity) : capacity_(capacity) {}

  // A kept buffer of exactly `nbytes` on `device`, or an empty DataPtr.
  c10::DataPtr take(size_t nbytes, c10::Device device);
  // Keeps `ptr` (`nbytes` long); past the capacity the oldest buffer is freed.
  void give(c10::DataPtr ptr, size_t nbytes);
  // Frees every kept buffer (before the optimizer step: the pool adds nothing to its peak).
  void clear() { kept_.clear(); }
  int64_t bytes() const;

 private:
  struct Kept {
    c10::DataPtr ptr;
    size_t nbytes;
  };
  std::deque<Kept> kept_;
  size_t capacity_;
};

}  // namespace gpulab::train::dist
