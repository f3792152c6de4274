// Samplers decide the order in which a loader visits a data set, one list of indices per epoch.
// The distributed sampler (dist/) implements the same interface to give each rank its shard.
#pragma once

#include <cstdint>
#include <vector>

namespace gpulab::train {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The indices to visit in `epoch`; the same epoch always gives the same list.
  virtual std::vector<int64_t> epoch_indices(int64_t epoch) = 0;
};

// 0, 1, ..., size-1 every epoch (evaluation).
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size) : size_(size) {}
  std::vector<int64_t> epoch_indices(int64_t epoch) override;

 private:
  int64_t size_;
};

// A permutation of 0..size-1 shuffled with seed + epoch, so runs repeat and epochs differ.
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {}
  std::vector<int64_t> epoch_indices(int64_t epoch) override;

 private:
  int64_t size_;
  uint64_t seed_;
};

// The permutation RandomSampler uses (a Fisher–Yates shuffle driven by a 64-bit mixer, so it is
// the same on every platform and library version). Exposed for samplers that shard it.
std::vector<int64_t> seeded_permutation(int64_t size, uint64_t seed);

}  // namespace gpulab::train
