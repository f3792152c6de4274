// Tests `gpulab bench train` on the CPU with a small batch: synthetic data through the library
// (split data/compute time, memory, summary), CIFAR-format files through the CLI's --json (the
// row bench/compare reads), and a bad step count as a clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "bench/train_bench.h"
#include "core/json.h"
#include "core/subprocess.h"

using namespace gpulab;
namespace fs = std::filesystem;

namespace {

bench::TrainBenchOptions small_run() {
  bench::TrainBenchOptions o;
  o.train.model = "resnet18";
  o.train.dataset = "synthetic";
  o.train.device = "cpu";
  o.train.input_size = 32;
  o.train.batch_size = 8;
  o.train.threads = 1;
  o.train.num_workers = 1;
  o.steps = 2;
  o.warmup = 1;
  return o;
}

}  // namespace

TEST(TrainBench, SyntheticStepsSplitIntoDataAndCompute) {
  auto r = bench::run_train_bench(small_run());
  EXPECT_EQ(r.steps, 2);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_EQ(r.batch_size, 8);
  EXPECT_EQ(r.device, "cpu");
  EXPECT_GT(r.compute_seconds, 0.0);
  EXPECT_GE(r.data_seconds, 0.0);
  // The same division in double (16 images over the measured seconds): rounding only.
  EXPECT_NEAR(r.images_per_second, 2 * 8 / (r.data_seconds + r.compute_seconds), 1e-6);
  // libtorch and a ResNet-18 alone hold far more than 50 MiB resident.
  EXPECT_GT(r.peak_host_memory_bytes, int64_t{50} << 20);
  EXPECT_FALSE(r.peak_device_memory_bytes.has_value());
  const Json j = r.to_json();
  for (const char* k :
       {"images_per_second", "data_seconds", "compute_seconds", "peak_host_memory_bytes", "threads",
        "omp_wait_policy", "memory_format", "torch"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_NE(r.summary().find("waiting for data"), std::string::npos) << r.summary();
  // A ResNet in fp32 on the CPU trains channels-last unless told otherwise, and says so.
  EXPECT_EQ(r.memory_format, "channels_last");
  EXPECT_NE(r.summary().find("Memory format: channels_last (auto"), std::string::npos)
      << r.summary();
}

TEST(TrainBench, MemoryFormatContiguousIsHonoured) {
  auto o = small_run();
  o.steps = 1;
  o.warmup = 0;
  o.train.memory_format = "contiguous";
  auto r = bench::run_train_bench(o);
  EXPECT_EQ(r.memory_format, "contiguous");
  EXPECT_EQ(r.to_json()["memory_format"], "contiguous");
}

TEST(TrainBench, CifarFilesThroughTheCliAsJson) {
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "/usr/bin/python3 is missing";
  const fs::path dir =
      fs::temp_directory_path() / ("gpulab-bench-cifar-" + std::to_string(getpid()));
  RunOptions ro;
  ro.timeout = std::chrono::seconds(120);
  auto made =
      run_process({"/usr/bin/python3", std::string(GPULAB_SOURCE_DIR) + "/bench/make_cifar.py",
                   (dir / "cifar-10-batches-py").string(), "64"},
                  ro);
  ASSERT_TRUE(made.ok());
  ASSERT_TRUE(made->success()) << made->err;
  auto r = run_process(
      {GPULAB_BINARY,  "bench",   "train",        "--json",     "--model",       "resnet18",
       "--dataset",    "cifar10", "--data_dir",   dir.string(), "--device",      "cpu",
       "--batch_size", "16",      "--input_size", "32",         "--steps",       "2",
       "--warmup",     "1",       "--threads",    "1",          "--num_workers", "1"},
      ro);
  fs::remove_all(dir);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->exit_code, 0) << r->err << r->out;
  // The JSON row is the last line; the trainer's own lines come first.
  const auto last = r->out.rfind('{');
  ASSERT_NE(last, std::string::npos) << r->out;
  const Json j = Json::parse(r->out.substr(last));
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["batch_size"], 16);
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GT(j["images_per_second"].get<double>(), 0.0);
  EXPECT_GT(j["compute_seconds"].get<double>(), 0.0);
  EXPECT_GE(j["data_seconds"].get<double>(), 0.0);
  EXPECT_GT(j["peak_host_memory_bytes"].get<int64_t>(), int64_t{50} << 20);
  // Without a policy of the user's, the CLI re-executes itself with the bounded spin.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    EXPECT_EQ(j["omp_wait_policy"], "GOMP_SPINCOUNT=1000 (gpulab default)");
  }
}

TEST(TrainBench, ZeroStepsIsRefusedWithAHint) {
  auto o = small_run();
  o.steps = 0;
  auto s = bench::validate(o);
  ASSERT_FALSE(s.ok()) << "a run of 0 timed steps was accepted";
  EXPECT_EQ(s.error().code, Code::kInvalidArgument);
  EXPECT_NE(s.error().message.find("--steps"), std::string::npos) << s.error().message;
}
