// DistributedSampler and ShardSampler: the ranks' k-th batches together are the single
// process's k-th global batch, every rank runs the same number of steps, evaluation shards
// cover each index exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "train/data/sampler.h"
#include "train/dist/distributed_sampler.h"

using namespace gpulab::train;
using gpulab::train::dist::DistributedSampler;
using gpulab::train::dist::ShardSampler;

TEST(DistSampler, RanksTogetherFormTheSingleProcessGlobalBatches) {
  const int64_t size = 96, global_batch = 24;
  for (int world : {2, 3, 4}) {
    RandomSampler single(size, 7);
    auto order = single.epoch_indices(3);
    std::vector<std::vector<int64_t>> shards;
    for (int r = 0; r < world; ++r)
      shards.push_back(DistributedSampler(size, 7, r, world).epoch_indices(3));
    const int64_t local = global_batch / world;
    for (int64_t b = 0; b < size / global_batch; ++b) {
      std::multiset<int64_t> from_ranks, expected;
      for (int r = 0; r < world; ++r)
        for (int64_t i = 0; i < local; ++i) from_ranks.insert(shards[r][b * local + i]);
      for (int64_t i = 0; i < global_batch; ++i) expected.insert(order[b * global_batch + i]);
      EXPECT_EQ(from_ranks, expected) << "world " << world << " batch " << b;
    }
  }
}

TEST(DistSampler, DropLastGivesEveryRankTheSameCountAndEpochsDiffer) {
  const int64_t size = 101;
  std::set<int64_t> seen;
  for (int r = 0; r < 3; ++r) {
    DistributedSampler s(size, 1, r, 3);
    auto e0 = s.epoch_indices(0);
    EXPECT_EQ(e0.size(), 33u);
    EXPECT_EQ(e0, s.epoch_indices(0));  // repeatable
    EXPECT_NE(e0, s.epoch_indices(1));  // reshuffled per epoch
    for (auto i : e0) EXPECT_TRUE(seen.insert(i).second) << "index " << i << " twice";
  }
  EXPECT_EQ(seen.size(), 99u);
}

TEST(DistSampler, EvalShardsCoverEveryIndexOnceWithoutPadding) {
  for (int world : {1, 2, 3, 7}) {
    std::vector<int64_t> all;
    for (int r = 0; r < world; ++r) {
      auto s = ShardSampler(100, r, world).epoch_indices(0);
      all.insert(all.end(), s.begin(), s.end());
    }
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), 100u) << world;
    for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(all[i], i);
  }
}
