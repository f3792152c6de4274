// Which world ranks generate and which train (train/rl/grpo_rollout_link.h's GenerationLayout),
// by default and with --generation_gpu_ids naming other local ranks, and how that flag is read
// (train/tasks/grpo_split.h).
#include <gtest/gtest.h>

#include <vector>

#include "train/rl/grpo_rollout_link.h"
#include "train/tasks/grpo_split.h"

namespace gpulab::train {
namespace {

using Ranks = std::vector<int>;

TEST(GenerationLayout, TheFirstRanksGenerateByDefault) {
  const rl::GenerationLayout l({0}, 3);
  EXPECT_EQ(l.generation_ranks(), 1);
  EXPECT_EQ(l.training_ranks(), 2);
  EXPECT_TRUE(l.generates(0));
  EXPECT_FALSE(l.generates(1));
  EXPECT_EQ(l.training_group(), (Ranks{1, 2}));
  EXPECT_EQ(l.sync_group(), (Ranks{0, 1}));
  EXPECT_EQ(l.world_rank_of_training(1), 2);
  EXPECT_EQ(l.training_index(2), 1);
  EXPECT_EQ(l.training_index(0), -1);
  EXPECT_EQ(l.served_by(0), (Ranks{0, 1}));
}

// Generation on world ranks 1 and 3 of 5: ranks 0, 2 and 4 train, in that order, and the
// generation ranks serve them round robin.
TEST(GenerationLayout, NamedRanksGenerateWhereverTheyAre) {
  const rl::GenerationLayout l({1, 3}, 5);
  EXPECT_EQ(l.training_group(), (Ranks{0, 2, 4}));
  EXPECT_EQ(l.sync_group(), (Ranks{1, 3, 0}));
  EXPECT_EQ(l.sync_root(), 2);
  EXPECT_EQ(l.generation_index(3), 1);
  EXPECT_EQ(l.generation_index(2), -1);
  EXPECT_EQ(l.training_index(4), 2);
  EXPECT_EQ(l.world_rank_of_training(1), 2);
  EXPECT_EQ(l.served_by(0), (Ranks{0, 2}));
  EXPECT_EQ(l.served_by(1), (Ranks{1}));
  EXPECT_EQ(l.world_rank_of_generation(l.server_of(1)), 3);
}

TEST(GenerationGpuIds, AListSetsTheCountAndTheRanks) {
  TrainOptions o;
  o.generation_gpu_ids = "7, 6";
  ASSERT_TRUE(take_generation_gpu_ids(o));
  EXPECT_EQ(o.generation_gpus, 2);
  EXPECT_EQ(generation_world_ranks(o), (Ranks{6, 7}));
  TrainOptions by_count;
  by_count.generation_gpus = 2;
  ASSERT_TRUE(take_generation_gpu_ids(by_count));
  EXPECT_EQ(generation_world_ranks(by_count), (Ranks{0, 1}));
}

TEST(GenerationGpuIds, WhatIsNotAListOfDistinctIndicesIsRefused) {
  for (const char* bad : {"a", "-1", "1,,2", "2,2", ",", "1.5"}) {
    TrainOptions o;
    o.generation_gpu_ids = bad;
    const auto st = take_generation_gpu_ids(o);
    ASSERT_FALSE(st) << bad;
    EXPECT_NE(st.error().message.find("--generation_gpu_ids"), std::string::npos) << bad;
    EXPECT_EQ(o.generation_gpus, 0) << bad;
  }
  TrainOptions mismatch;
  mismatch.generation_gpus = 1;
  mismatch.generation_gpu_ids = "0,1";
  EXPECT_FALSE(take_generation_gpu_ids(mismatch));
}

}  // namespace
}  // namespace gpulab::train
