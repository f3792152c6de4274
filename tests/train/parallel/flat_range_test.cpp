// A flat range of a rank's tensor as boxes (flat_range.h): the boxes of any range of any shape
// hold exactly its elements, in order, each box contiguous; and the ordinary tensor's boxes a
// range of a tensor-parallel shard holds (a plain split, GPT-2's three fused runs, vocabulary
// padding) are that shard's values where they lie in the ordinary tensor, padding in none.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <random>
#include <vector>

#include "train/parallel/flat_range.h"

using namespace gpulab::train::parallel;

namespace {

// The flat indices of a box's elements, in row-major order.
std::vector<int64_t> flat_indices(const std::vector<int64_t>& shape, const Box& b) {
  auto all = torch::arange(b.numel() == 0 ? 0 : torch::ones(shape).numel()).view(shape);
  if (shape.empty()) return {0};
  const auto v = in_box(all, b.at, b.size).contiguous().view({-1});
  return {v.data_ptr<int64_t>(), v.data_ptr<int64_t>() + v.numel()};
}

std::vector<int64_t> random_shape(std::mt19937& rng) {
  std::uniform_int_distribution<int> dims(0, 4), size(1, 5);
  std::vector<int64_t> shape(static_cast<size_t>(dims(rng)));
  for (auto& s : shape) s = size(rng);
  return shape;
}

}  // namespace

TEST(FlatRange, BoxesOfAnyRangeHoldItsElementsInOrder) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const auto shape = random_shape(rng);
    int64_t numel = 1;
    for (auto s : shape) numel *= s;
    std::uniform_int_distribution<int64_t> pick(0, numel);
    int64_t begin = pick(rng), end = pick(rng);
    if (begin > end) std::swap(begin, end);
    const auto boxes = contiguous_boxes(shape, begin, end);
    int64_t next = begin;
    for (const auto& b : boxes) {
      ASSERT_GT(b.numel(), 0);
      for (auto i : flat_indices(shape, b)) ASSERT_EQ(i, next++) << "trial " << trial;
    }
    EXPECT_EQ(next, end) << "trial " << trial;
    EXPECT_LE(boxes.size(), std::max<size_t>(1, 2 * shape.size())) << "trial " << trial;
  }
}

// Each run's placed boxes, read from the range's flat values, are the ordinary tensor's values
// there; together they hold every value of the range that is not padding, once.
TEST(FlatRange, RunsOfAShardRangeAreTheOrdinaryValuesThere) {
  const auto whole = torch::arange(12 * 5, torch::kDouble).view({12, 5});
  // GPT-2's fused q/k/v cut for rank 1 of 2 along dim 0 (three runs of 2 rows), and a
  // vocabulary-parallel last rank: 3 rows of the ordinary tensor, 1 row of padding.
  const std::vector<TpSlices> cuts = {
      {0, 6, {{0, 2, 2}, {2, 6, 2}, {4, 10, 2}}, true},
      {0, 4, {{0, 9, 3}}, true},
      {1, 3, {{0, 2, 3}}, true},
      whole_tensor(),
  };
  std::mt19937 rng(3);
  for (const auto& s : cuts) {
    const auto local = shard_by_slices(whole, s);
    const auto flat = local.reshape({-1});
    const auto real = shard_by_slices(torch::ones_like(whole), s).reshape({-1});  // 0: padding
    for (int trial = 0; trial < 50; ++trial) {
      std::uniform_int_distribution<int64_t> pick(0, flat.numel());
      int64_t begin = trial == 0 ? 0 : pick(rng), end = trial == 0 ? flat.numel() : pick(rng);
      if (begin > end) std::swap(begin, end);
      auto seen = torch::zeros_like(whole);
      for (const auto& run : flat_range_runs(s, whole.sizes(), local.sizes(), begin, end)) {
        const auto v = run_view(flat.narrow(0, begin, end - begin), run);
        for (const auto& q : run.placed) {
          EXPECT_TRUE(torch::equal(in_box(v, q.local_at, q.whole.size),
                                   in_box(whole, q.whole.at, q.whole.size)));
          in_box(seen, q.whole.at, q.whole.size).add_(1);
        }
      }
      // Every value of the ordinary tensor the range holds (all but its padding), once.
      EXPECT_LE(seen.max().item<double>(), 1.0);
      EXPECT_EQ(seen.sum().item<double>(), real.narrow(0, begin, end - begin).sum().item<double>());
    }
  }
}
