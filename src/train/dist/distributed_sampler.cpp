// DistributedSampler and ShardSampler (see the header for why the shards are strided).
#include "train/dist/distributed_sampler.h"

#include <numeric>

#include "core/error.h"

namespace gpulab::train::dist {

DistributedSampler::DistributedSampler(int64_t size, uint64_t seed, int rank, int world_size,
                                       bool shuffle, bool drop_last)
    : size_(size),
      seed_(seed),
      rank_(rank),
      world_(world_size),
      shuffle_(shuffle),
      drop_last_(drop_last) {
  GPULAB_ASSERT(world_size >= 1 && rank >= 0 && rank < world_size, "rank outside the world");
}

int64_t DistributedSampler::per_rank() const {
  return drop_last_ ? size_ / world_ : (size_ + world_ - 1) / world_;
}

std::vector<int64_t> DistributedSampler::epoch_indices(int64_t epoch) {
  std::vector<int64_t> order;
  if (shuffle_) {
    // The same permutation RandomSampler gives one process for this seed and epoch.
    order = RandomSampler(size_, seed_).epoch_indices(epoch);
  } else {
    order.resize(static_cast<size_t>(size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t n = per_rank();
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    // Without drop_last the tail wraps around to the start (PyTorch's padding).
    int64_t pos = (i * world_ + rank_) % std::max<int64_t>(1, size_);
    if (size_ > 0) out.push_back(order[static_cast<size_t>(pos)]);
  }
  return out;
}

std::vector<int64_t> ShardSampler::epoch_indices(int64_t /*epoch*/) {
  std::vector<int64_t> out;
  for (int64_t i = rank_; i < size_; i += world_) out.push_back(i);
  return out;
}

}  // namespace gpulab::train::dist
