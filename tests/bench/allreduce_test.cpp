// `gpulab bench allreduce` through the CLI with real ranks (Gloo on loopback): rows for every
// size, bus bandwidth as nccl-tests defines it, and a correct sum in every row.
#include <gtest/gtest.h>

#include "bench/allreduce.h"
#include "core/json.h"
#include "core/subprocess.h"

using namespace gpulab;

TEST(AllreduceBench, BusFactorIsNcclTests) {
  EXPECT_DOUBLE_EQ(bench::allreduce_bus_factor(1), 0.0);
  EXPECT_DOUBLE_EQ(bench::allreduce_bus_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(bench::allreduce_bus_factor(4), 1.5);
  EXPECT_DOUBLE_EQ(bench::allreduce_bus_factor(8), 1.75);
}

TEST(AllreduceBench, ThreeRanksThroughTheCli) {
  RunOptions ro;
  ro.timeout = std::chrono::seconds(120);
  auto r = run_process({GPULAB_BINARY, "bench", "allreduce", "--nproc_per_node", "3", "--min_bytes",
                        "1024", "--max_bytes", "262144", "--iters", "3", "--json"},
                       ro);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit_code, 0) << r->err;
  auto j = nlohmann::json::parse(r->out);
  EXPECT_EQ(j["backend"], "gloo");
  EXPECT_EQ(j["ranks"], 3);
  ASSERT_EQ(j["rows"].size(), 5u);  // 1 KiB .. 256 KiB by 4x
  int64_t bytes = 1024;
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["bytes"].get<int64_t>(), bytes);
    EXPECT_EQ(row["count"].get<int64_t>(), bytes / 4);
    EXPECT_EQ(row["wrong"].get<int64_t>(), 0);
    // The bench's own arithmetic redone in double: a few roundings, 1e-9 of the value.
    const double algbw = row["algbw_gbs"].get<double>();
    EXPECT_GT(algbw, 0.0);
    EXPECT_NEAR(algbw, bytes / (row["time_us"].get<double>() * 1e-6) / 1e9, algbw * 1e-9);
    EXPECT_NEAR(row["busbw_gbs"].get<double>(), algbw * 4.0 / 3.0, algbw * 1e-9);
    bytes *= 4;
  }
}

TEST(AllreduceBench, BadSweepIsRejected) {
  auto r = run_process(
      {GPULAB_BINARY, "bench", "allreduce", "--min_bytes", "4096", "--max_bytes", "1024"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 2) << r->err;
  EXPECT_NE(r->err.find("bad sweep"), std::string::npos) << r->err;
}
