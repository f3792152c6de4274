// GPU choice: exclusive, pack vs spread, links and NUMA preferred, exhaustion reported.
#include <gtest/gtest.h>

#include "service/domain/gpu_allocator.h"

namespace gpulab::service {
namespace {

GpuSlot gpu(int index, int numa, std::vector<int> links = {}) {
  GpuSlot g;
  g.uuid = "GPU-" + std::to_string(index);
  g.index = index;
  g.vendor = "nvidia";
  g.numa_node = numa;
  g.links = std::move(links);
  return g;
}

std::vector<int> indices(const std::vector<GpuSlot>& v) {
  std::vector<int> out;
  for (const auto& g : v) out.push_back(g.index);
  return out;
}

TEST(GpuAllocator, FirstFitMatchesTheSeed) {
  std::vector<GpuSlot> inv = {gpu(0, -1), gpu(1, -1)};
  auto a = choose_gpus(inv, {}, 1, AllocationPolicy::kPack);
  ASSERT_TRUE(a);
  EXPECT_EQ(indices(*a), std::vector<int>{0});
  auto b = choose_gpus(inv, {"GPU-0"}, 1, AllocationPolicy::kPack);
  ASSERT_TRUE(b);
  EXPECT_EQ(indices(*b), std::vector<int>{1});
  EXPECT_FALSE(choose_gpus(inv, {"GPU-0", "GPU-1"}, 1, AllocationPolicy::kPack));
  EXPECT_FALSE(choose_gpus(inv, {}, 3, AllocationPolicy::kPack));
  auto none = choose_gpus(inv, {}, 0, AllocationPolicy::kPack);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(GpuAllocator, PrefersLinkedGpus) {
  // 0-3 on one node; only 1 and 3 are linked.
  std::vector<GpuSlot> inv = {gpu(0, 0), gpu(1, 0, {3}), gpu(2, 0), gpu(3, 0, {1})};
  auto a = choose_gpus(inv, {}, 2, AllocationPolicy::kPack);
  ASSERT_TRUE(a);
  EXPECT_EQ(indices(*a), (std::vector<int>{1, 3}));
}

TEST(GpuAllocator, PrefersOneNumaNode) {
  std::vector<GpuSlot> inv = {gpu(0, 0), gpu(1, 1), gpu(2, 0), gpu(3, 1)};
  auto a = choose_gpus(inv, {"GPU-0"}, 2, AllocationPolicy::kPack);
  ASSERT_TRUE(a);
  EXPECT_EQ(indices(*a), (std::vector<int>{1, 3}));  // the whole free node, not 2 + 1
}

TEST(GpuAllocator, PackFillsPartlyUsedNodeSpreadDoesNot) {
  std::vector<GpuSlot> inv = {gpu(0, 0), gpu(1, 0), gpu(2, 1), gpu(3, 1)};
  std::set<std::string> used = {"GPU-0"};
  auto pack = choose_gpus(inv, used, 1, AllocationPolicy::kPack);
  auto spread = choose_gpus(inv, used, 1, AllocationPolicy::kSpread);
  ASSERT_TRUE(pack && spread);
  EXPECT_EQ(indices(*pack), std::vector<int>{1});    // keeps node 1 whole
  EXPECT_EQ(indices(*spread), std::vector<int>{2});  // goes to the emptier node
}

TEST(GpuAllocator, NeverReturnsAUsedGpu) {
  std::vector<GpuSlot> inv;
  for (int i = 0; i < 8; ++i) inv.push_back(gpu(i, i / 4, {i ^ 1}));
  std::set<std::string> used;
  for (int round = 0; round < 4; ++round) {
    auto a =
        choose_gpus(inv, used, 2, round % 2 ? AllocationPolicy::kSpread : AllocationPolicy::kPack);
    ASSERT_TRUE(a);
    for (const auto& g : *a) EXPECT_TRUE(used.insert(g.uuid).second) << g.uuid << " given twice";
  }
  EXPECT_EQ(used.size(), 8u);
  EXPECT_FALSE(choose_gpus(inv, used, 1, AllocationPolicy::kPack));
}

}  // namespace
}  // namespace gpulab::service
