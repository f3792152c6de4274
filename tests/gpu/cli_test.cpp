// `gpulab detect` end to end: the built binary on the captured trees and on this machine.
#include <gtest/gtest.h>

#include "core/json.h"
#include "core/subprocess.h"
#include "fixtures.h"

using namespace gpulab;
using gpulab::gpu::testing::fixture;

namespace {

ProcessResult gpulab_cli(std::vector<std::string> args) {
  args.insert(args.begin(), GPULAB_BINARY);
  auto r = run_process(args);
  if (!r.ok()) ADD_FAILURE() << r.error().message;
  return r.ok() ? *r : ProcessResult{};
}

}  // namespace

TEST(DetectCli, Mi300xJsonRoundTrips) {
  auto r = gpulab_cli({"detect", "--root", fixture("mi300x-x2").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = parse_json(r.out);
  ASSERT_TRUE(j.ok()) << j.error().message << "\n" << r.out;
  EXPECT_EQ((*j)["vendor"], "amd");
  ASSERT_EQ((*j)["gpus"].size(), 2u);
  for (const auto& g : (*j)["gpus"]) {
    EXPECT_EQ(g["name"], "AMD Instinct MI300X");
    EXPECT_EQ(g["memory_total_bytes"], 206158430208ull);
    EXPECT_EQ(g["gfx_target"], "gfx942");
    EXPECT_EQ(g["memory_partition"], "NPS1");
    EXPECT_EQ(g["compute_partition"], "SPX");
  }
  EXPECT_EQ((*j)["links"][0]["type"], "xgmi");
}

TEST(DetectCli, H100HumanTableShowsComputeCapability) {
  auto r = gpulab_cli({"detect", "--root", fixture("h100").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("NVIDIA H100 80GB HBM3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cc 9.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("550.54.15"), std::string::npos) << r.out;
}

TEST(DetectCli, RequirePartitionFailsOnNps2CpxWithHint) {
  auto r = gpulab_cli(
      {"detect", "--root", fixture("mi300x-nps2-cpx").string(), "--require-partition", "NPS1,SPX"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Detected unsupported configuration"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Current configuration: NPS2, CPX"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("amd-smi set --memory-partition NPS1"), std::string::npos) << r.err;
}

TEST(DetectCli, RequirePartitionPassesOnNps1Spx) {
  auto r = gpulab_cli(
      {"detect", "--root", fixture("mi300x-x2").string(), "--require-partition", "NPS1,SPX"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Partition check passed"), std::string::npos) << r.out;
}

TEST(DetectCli, RequirePartitionOnNvidiaHostIsEnvironmentNotReady) {
  auto r =
      gpulab_cli({"detect", "--root", fixture("h100").string(), "--require-partition", "NPS1,SPX"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("no AMD GPU"), std::string::npos) << r.err;
}

TEST(DetectCli, BadInputsExitTwo) {
  EXPECT_EQ(gpulab_cli({"detect", "--root", "/nonexistent/gpulab-tree"}).exit_code, 2);
  auto r = gpulab_cli(
      {"detect", "--root", fixture("mi300x-x2").string(), "--require-partition", "NPS9"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("NPS9"), std::string::npos) << r.err;
}

TEST(DetectCli, ThisMachineWithoutGpuExitsZero) {
  if (std::filesystem::exists("/dev/nvidiactl") || std::filesystem::exists("/dev/kfd"))
    GTEST_SKIP() << "this machine has a GPU driver loaded";
  auto r = gpulab_cli({"detect"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("No GPU detected:"), std::string::npos) << r.out;
  auto j = gpulab_cli({"detect", "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  auto parsed = parse_json(j.out);
  ASSERT_TRUE(parsed.ok()) << j.out;
  EXPECT_EQ((*parsed)["vendor"], "none");
  EXPECT_EQ((*parsed)["gpu_count"], 0);
  EXPECT_TRUE((*parsed)["host"].is_object());
}
