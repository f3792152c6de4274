// The device mesh's rank arithmetic and refusals (no processes), and its process groups with
// four real ranks over Gloo: each group's all-reduce of the world ranks sums exactly its members.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "train/dist_worker.h"
#include "train/parallel/device_mesh.h"

using namespace gpulab;
using namespace gpulab::train;
using gpulab::train::parallel::MeshLayout;
namespace fs = std::filesystem;

namespace {

TEST(MeshLayout, TensorParallelInnermostThenPipelineThenData) {
  MeshLayout m(16, 2, 4);  // dp 2
  EXPECT_EQ(m.dp(), 2);
  auto c = m.coord(13);  // 13 = 1 + 2 * (2 + 4 * 1)
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.pp, 2);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(m.rank(c), 13);
  EXPECT_EQ(m.tp_group(13), (std::vector<int>{12, 13}));
  EXPECT_EQ(m.pp_group(13), (std::vector<int>{9, 11, 13, 15}));
  EXPECT_EQ(m.dp_group(13), (std::vector<int>{5, 13}));
  for (int r = 0; r < 16; ++r) EXPECT_EQ(m.rank(m.coord(r)), r);
}

TEST(MeshLayout, DegenerateMeshIsDataParallelAlone) {
  MeshLayout m(3, 1, 1);
  EXPECT_EQ(m.dp(), 3);
  EXPECT_EQ(m.tp_group(2), (std::vector<int>{2}));
  EXPECT_EQ(m.dp_group(2), (std::vector<int>{0, 1, 2}));
}

TEST(MeshLayout, RefusesSizesThatDoNotTileTheWorld) {
  try {
    MeshLayout(6, 4, 1);
    FAIL() << "tp 4 on 6 ranks was accepted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("does not divide the world size 6, --tp 4"),
              std::string::npos)
        << e.what();
    EXPECT_NE(e.hint().find("--tp 2 --pp 1"), std::string::npos) << e.hint();
  }
  EXPECT_THROW(MeshLayout(8, 0, 1), Exception);
  EXPECT_THROW(MeshLayout(8, 2, -1), Exception);
  EXPECT_THROW(MeshLayout(0, 1, 1), Exception);
}

int mesh_scenario() {
  dist::Communicator world = train::testing::worker_world();
  parallel::DeviceMesh mesh(world, 2, 2);
  std::vector<torch::Tensor> sums;
  for (auto* g : {&mesh.tp(), &mesh.pp(), &mesh.dp()}) {
    auto t = torch::full({1}, static_cast<double>(world.rank()), torch::kFloat64);
    g->allreduce_sum(t);
    sums.push_back(t);
  }
  train::testing::save_tensors("mesh" + std::to_string(world.rank()), sums);
  return 0;
}
train::testing::DistScenario mesh_worker("mesh", mesh_scenario);

TEST(DeviceMesh, FourRanksTwoByTwoGroupsHoldTheirMembers) {
  auto dir = fs::temp_directory_path() / ("gpulab-mesh-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto r = train::testing::run_ranks("mesh", 4, dir);
  ASSERT_EQ(r.exit_code, 0) << r.message;
  // TP 2 x PP 2 on 4 ranks: TP {0,1} {2,3}; PP {0,2} {1,3}; DP alone.
  const double tp[] = {1, 1, 5, 5}, pp[] = {2, 4, 2, 4};
  for (int rank = 0; rank < 4; ++rank) {
    auto s = train::testing::load_tensors(dir / ("mesh" + std::to_string(rank) + ".pt"));
    ASSERT_EQ(s.size(), 3u);
    EXPECT_EQ(s[0].item<double>(), tp[rank]) << "rank " << rank;
    EXPECT_EQ(s[1].item<double>(), pp[rank]) << "rank " << rank;
    EXPECT_EQ(s[2].item<double>(), rank) << "rank " << rank;
  }
  fs::remove_all(dir);
}

}  // namespace
