// Sharding for DDP. Training: every rank draws from the same seeded per-epoch permutation that
// a single process would use and takes every world_size-th index (drop_last trims the tail so
// all ranks run the same number of steps); the union of the ranks' k-th batches is then the
// single process's k-th global batch. Evaluation: each index exactly once over all ranks, no
// padding, so summed counts equal the single-process ones.
#pragma once

#include <cstdint>
#include <vector>

#include "train/data/sampler.h"

namespace gpulab::train::dist {

class DistributedSampler : public Sampler {
 public:
  DistributedSampler(int64_t size, uint64_t seed, int rank, int world_size, bool shuffle = true,
                     bool drop_last = true);
  std::vector<int64_t> epoch_indices(int64_t epoch) override;
  // Indices per rank and epoch (the same on every rank).
  int64_t per_rank() const;

 private:
  int64_t size_;
  uint64_t seed_;
  int rank_, world_;
  bool shuffle_, drop_last_;
};

// Evaluation shard: rank, rank + world, ... (ranks may differ by one index; nothing repeats).
class ShardSampler : public Sampler {
 public:
  ShardSampler(int64_t size, int rank, int world_size)
      : size_(size), rank_(rank), world_(world_size) {}
  std::vector<int64_t> epoch_indices(int64_t epoch) override;

 private:
  int64_t size_;
  int rank_, world_;
};

}  // namespace gpulab::train::dist
