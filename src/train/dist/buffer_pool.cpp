// BufferPool: exact-size reuse of freed flat buffers, oldest evicted first.
#include "train/dist/buffer_pool.h"

namespace gpulab::train::dist {

c10::DataPtr BufferPool::take(size_t nbytes, c10::Device device) {
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->nbytes != nbytes || it->ptr.device() != device) continue;
    c10::DataPtr out = std::move(it->ptr);
    kept_.erase(it);
    return out;
  }
  return c10::DataPtr(nullptr, device);
}

void BufferPool::give(c10::DataPtr ptr, size_t nbytes) {
  if (!ptr || !ptr.device().is_cpu()) return;  // freed here, as without a pool
  kept_.push_back({std::move(ptr), nbytes});
  while (kept_.size() > capacity_) kept_.pop_front();
}

int64_t BufferPool::bytes() const {
  int64_t total = 0;
  for (const auto& k : kept_) total += static_cast<int64_t>(k.nbytes);
  return total;
}

}  // namespace gpulab::train::dist
