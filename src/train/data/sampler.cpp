// Sequential and seeded random samplers (see sampler.h).
#include "train/data/sampler.h"

#include <numeric>

#include "train/data/transforms.h"

namespace gpulab::train {

std::vector<int64_t> SequentialSampler::epoch_indices(int64_t /*epoch*/) {
  std::vector<int64_t> v(static_cast<size_t>(size_));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

std::vector<int64_t> seeded_permutation(int64_t size, uint64_t seed) {
  std::vector<int64_t> v(static_cast<size_t>(size));
  std::iota(v.begin(), v.end(), int64_t{0});
  uint64_t state = mix64(seed ^ 0x243F6A8885A308D3ull);
  for (int64_t i = size - 1; i > 0; --i) {
    state += 0x9E3779B97F4A7C15ull;
    const uint64_t r = mix64(state);
    const auto j = static_cast<int64_t>(r % static_cast<uint64_t>(i + 1));
    std::swap(v[static_cast<size_t>(i)], v[static_cast<size_t>(j)]);
  }
  return v;
}

std::vector<int64_t> RandomSampler::epoch_indices(int64_t epoch) {
  return seeded_permutation(size_, seed_ + static_cast<uint64_t>(epoch));
}

}  // namespace gpulab::train
