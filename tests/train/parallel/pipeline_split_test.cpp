// The pipeline's stage split: the cost model adds up to the planner's training FLOPs, the
// min-max partition puts the head's cost against blocks, and a --pp the blocks cannot fill is
// refused with the numbers.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "train/parallel/pipeline_split.h"

using namespace gpulab;
using namespace gpulab::train::parallel;

namespace {

std::vector<int64_t> block_counts(const std::vector<StageSpan>& spans) {
  std::vector<int64_t> out;
  for (const auto& s : spans) out.push_back(s.num_blocks);
  return out;
}

TEST(PipelineSplit, CostsAddUpToTheTrainingFlopsPerToken) {
  formats::DecoderConfig c;  // the 7B shape's defaults: 32 blocks, hidden 4096, vocab 32000
  const StageCosts s = decoder_stage_costs(c, 2048);
  const double whole = s.embedding + static_cast<double>(c.num_layers) * s.block + s.head;
  EXPECT_DOUBLE_EQ(whole, c.train_flops_per_token(2048) + 2.0 * c.hidden_size);
  // The output layer, 6 · 4096 · 32000 = 786M, against a block's 6 · (4 · 4096² + 3 · 4096 ·
  // 11008) + 12 · 4096 · 2048 = 1,315M: about 0.6 of a block, counted, not ignored.
  EXPECT_GT(s.head / s.block, 0.59);
  EXPECT_LT(s.head / s.block, 0.61);
}

TEST(PipelineSplit, EqualBlocksSplitEvenlyAndTheRestGoesFirst) {
  const StageCosts free_ends{0, 1, 0};
  EXPECT_EQ(block_counts(split_stages(8, 4, 1, free_ends)), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(block_counts(split_stages(7, 2, 1, free_ends)), (std::vector<int64_t>{4, 3}));
  const auto spans = split_stages(8, 2, 1, free_ends);
  EXPECT_TRUE(spans[0].embedding && !spans[0].head);
  EXPECT_TRUE(spans[1].head && !spans[1].embedding);
  EXPECT_EQ(spans[1].first_block, 4);
}

TEST(PipelineSplit, TheHeadAndTheEmbeddingWeighAgainstBlocks) {
  // A head worth 1.5 blocks: 4 blocks over 2 stages as 3 + (1 + head) = max 3, not 2 + 3.5.
  EXPECT_EQ(block_counts(split_stages(4, 2, 1, {0, 1, 1.5})), (std::vector<int64_t>{3, 1}));
  // A head worth half a block: 2 + 2.5 beats 3 + 1.5.
  EXPECT_EQ(block_counts(split_stages(4, 2, 1, {0, 1, 0.5})), (std::vector<int64_t>{2, 2}));
  // An embedding worth two blocks moves blocks to the end instead.
  EXPECT_EQ(block_counts(split_stages(6, 2, 1, {2, 1, 0})), (std::vector<int64_t>{2, 4}));
  // 32 blocks, 4 stages, a head of 4 blocks: 9 9 9 5 (costs 9, 9, 9, 9).
  const auto spans = split_stages(32, 4, 1, {0, 1, 4});
  EXPECT_EQ(block_counts(spans), (std::vector<int64_t>{9, 9, 9, 5}));
  EXPECT_DOUBLE_EQ(spans[3].cost, 9);
}

TEST(PipelineSplit, VirtualStagesCutMoreChunks) {
  const auto spans = split_stages(8, 2, 2, {0, 1, 0});
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(block_counts(spans), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_TRUE(spans[0].embedding);
  EXPECT_TRUE(spans[3].head);  // chunk 3 is stage 1's second chunk
  EXPECT_EQ(spans[2].first_block, 4);
}

TEST(PipelineSplit, RefusesMoreStagesThanBlocksNamingTheNumbers) {
  EXPECT_NO_THROW(check_pipeline_split(4, 4));
  try {
    split_stages(4, 5, 1, {});
    FAIL() << "--pp 5 over 4 blocks was accepted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--pp 5 needs 5 blocks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("the model has 4"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--pp 4"), std::string::npos) << e.hint();
  }
  try {
    check_pipeline_split(4, 2, 3);
    FAIL() << "2 stages x 3 virtual over 4 blocks was accepted";
  } catch (const Exception& e) {
    EXPECT_NE(std::string(e.what()).find("needs 6 blocks"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--pp 1"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(check_pipeline_split(4, 0), Exception);
}

}  // namespace
