// DAPO's dynamic sampling: groups whose rewards are all equal are dropped and counted; the rows
// of the groups kept are listed in order; a group size below 2 or a partial group is refused.
#include <gtest/gtest.h>

#include "train/rl/dynamic_sampling.h"

namespace gpulab::train::rl {
namespace {

TEST(DynamicSampling, DropsGroupsWhoseRewardsAreAllEqual) {
  // Groups of 3: all 1, mixed, all 0, mixed by a hair, all 0.5.
  const std::vector<double> rewards = {1, 1,   1,   0,           1,   0,   0,  0,
                                       0, 0.5, 0.5, 0.5 + 1e-12, 0.5, 0.5, 0.5};
  auto f = drop_uniform_groups(rewards, 3).value_or_throw();
  EXPECT_EQ(f.dropped, 3);
  EXPECT_EQ(f.kept_groups, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(f.kept_rows, (std::vector<int64_t>{3, 4, 5, 9, 10, 11}));
  auto none = drop_uniform_groups(std::vector<double>{0, 1, 1, 0}, 2).value_or_throw();
  EXPECT_EQ(none.dropped, 0);
  EXPECT_EQ(none.kept_rows.size(), 4u);
  auto all = drop_uniform_groups(std::vector<double>{2, 2, 2, 2}, 2).value_or_throw();
  EXPECT_EQ(all.dropped, 2);
  EXPECT_TRUE(all.kept_rows.empty());
}

TEST(DynamicSampling, RefusesGroupsOfOneAndPartialGroups) {
  auto one = drop_uniform_groups(std::vector<double>{1, 2}, 1);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.error().message.find("a group of 1 completions has no advantage"),
            std::string::npos);
  EXPECT_FALSE(drop_uniform_groups(std::vector<double>{1, 2, 3}, 2).ok());
  EXPECT_FALSE(drop_uniform_groups(std::vector<double>{1, 2}, 0).ok());
  EXPECT_TRUE(drop_uniform_groups(std::vector<double>{}, 2).ok());
}

}  // namespace
}  // namespace gpulab::train::rl
