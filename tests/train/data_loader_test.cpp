// The input pipeline: samplers, determinism and worker-count independence of the DataLoader,
// the on-device pipeline (run on CPU tensors) against the worker path, the per-sample transform
// against torchvision, and loader throughput at 32 and 224 px.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "core/error.h"
#include "data_test_util.h"
#include "train/data/datasets.h"
#include "train/data/gpu_pipeline.h"
#include "train/data/loader.h"

namespace gpulab::train {
namespace {

DatasetPtr synthetic(int64_t n, std::vector<int64_t> shape, uint64_t seed = 1) {
  DatasetOptions o;
  o.synthetic_size = n;
  o.synthetic_shape = std::move(shape);
  o.seed = seed;
  return open_dataset("synthetic", "", Split::kTrain, o);
}

std::vector<Batch> run_epoch(DataLoader& loader, int64_t epoch) {
  std::vector<Batch> out;
  loader.start_epoch(epoch);
  while (auto b = loader.next()) out.push_back(std::move(*b));
  return out;
}

LoaderOptions augmenting(int workers, int64_t size) {
  LoaderOptions o;
  o.batch_size = 16;
  o.num_workers = workers;
  o.seed = 42;
  o.transform.input_size = size;
  o.transform.augment = true;
  o.mode = PipelineMode::kWorkers;
  return o;
}

TEST(DataSampler, SequentialAndSeededRandom) {
  SequentialSampler seq(5);
  EXPECT_EQ(seq.epoch_indices(3), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  RandomSampler a(1000, 9), b(1000, 9);
  auto e0 = a.epoch_indices(0);
  EXPECT_EQ(e0, b.epoch_indices(0));
  EXPECT_NE(e0, a.epoch_indices(1));
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 1000u);
  EXPECT_EQ(*std::min_element(e0.begin(), e0.end()), 0);
  EXPECT_EQ(*std::max_element(e0.begin(), e0.end()), 999);
  // seed + epoch: (seed 9, epoch 1) is (seed 10, epoch 0).
  EXPECT_EQ(a.epoch_indices(1), RandomSampler(1000, 10).epoch_indices(0));
}

TEST(DataLoader, SameBatchesForAnyWorkerCountAndRun) {
  auto ds = synthetic(70, {3, 32, 32});
  auto sampler = std::make_shared<RandomSampler>(ds->size(), 5);
  std::vector<std::vector<Batch>> runs;
  for (int workers : {0, 1, 3}) {
    DataLoader loader(ds, sampler, augmenting(workers, 40));
    auto batches = run_epoch(loader, 2);
    ASSERT_EQ(batches.size(), 5u);  // 70 / 16, last one partial
    EXPECT_EQ(batches.back().images.size(0), 6);
    EXPECT_EQ(batches[0].images.sizes(), (std::vector<int64_t>{16, 3, 40, 40}));
    EXPECT_EQ(batches[0].labels.scalar_type(), torch::kInt64);
    runs.push_back(std::move(batches));
  }
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t b = 0; b < runs[0].size(); ++b) {
      EXPECT_TRUE(torch::equal(runs[0][b].images, runs[r][b].images)) << r << " " << b;
      EXPECT_TRUE(torch::equal(runs[0][b].labels, runs[r][b].labels));
    }
  // Another epoch draws other crops, flips and order.
  DataLoader loader(ds, sampler, augmenting(2, 40));
  auto other = run_epoch(loader, 3);
  EXPECT_FALSE(torch::equal(other[0].images, runs[0][0].images));
  // drop_last drops the partial batch.
  auto o = augmenting(2, 40);
  o.drop_last = true;
  DataLoader dl(ds, sampler, o);
  EXPECT_EQ(run_epoch(dl, 0).size(), 4u);
  EXPECT_GE(dl.data_wait_seconds(), 0.0);
  EXPECT_EQ(dl.batches_delivered(), 4);
}

TEST(DataLoader, AbandonedEpochAndRestartAreSafe) {
  auto ds = synthetic(200, {3, 16, 16});
  DataLoader loader(ds, std::make_shared<SequentialSampler>(ds->size()), augmenting(3, 16));
  loader.start_epoch(0);
  ASSERT_TRUE(loader.next().has_value());
  loader.start_epoch(1);  // workers of epoch 0 are stopped, not leaked
  auto all = std::vector<Batch>();
  while (auto b = loader.next()) all.push_back(*b);
  EXPECT_EQ(all.size(), 13u);
  // Ended early (Ctrl-C): nothing more this epoch, and the next one starts from its first batch.
  loader.start_epoch(2);
  auto first = loader.next();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(loader.next().has_value());
  loader.abandon_epoch();
  EXPECT_FALSE(loader.next().has_value());
  loader.start_epoch(2);
  auto again = loader.next();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->index, 0);
  EXPECT_TRUE(torch::equal(again->images, first->images));
}

// The on-device pipeline (here on CPU tensors) gives the worker path's batches.
TEST(DataLoader, DevicePipelineMatchesWorkers) {
  struct Case {
    std::vector<int64_t> shape;
    int64_t size;
    bool augment;
    Normalization norm;
  };
  for (const Case& c : {Case{{3, 32, 32}, 32, true, Normalization::kImagenet},
                        Case{{3, 32, 32}, 48, true, Normalization::kNegOneOne},
                        Case{{1, 28, 28}, 36, true, Normalization::kImagenet},
                        Case{{1, 28, 28}, 28, false, Normalization::kZeroOne}}) {
    auto ds = synthetic(40, c.shape, 3);
    auto sampler = std::make_shared<RandomSampler>(ds->size(), 1);
    auto o = augmenting(2, c.size);
    o.transform.augment = c.augment;
    o.transform.normalize = c.norm;
    DataLoader cpu(ds, sampler, o);
    o.mode = PipelineMode::kDevice;
    DataLoader dev(ds, sampler, o);
    EXPECT_TRUE(dev.on_device());
    auto a = run_epoch(cpu, 4), b = run_epoch(dev, 4);
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(a[k].images.sizes(), b[k].images.sizes());
      EXPECT_EQ(a[k].images.size(1), 3);
      const float diff = (a[k].images - b[k].images).abs().max().item<float>();
      EXPECT_LE(diff, 1e-6f) << "case " << c.size << " batch " << k;
      EXPECT_TRUE(torch::equal(a[k].labels, b[k].labels));
    }
  }
}

// One transform against torchvision: pad + crop, flip, Resize (bilinear, antialias off) and
// Normalize on a float tensor.
TEST(DataTransforms, MatchTorchvision) {
  GPULAB_REQUIRE_PYTHON();
  testing::TempDir dir;
  auto img =
      torch::arange(3 * 32 * 32, torch::kInt64).remainder(251).to(torch::kUInt8).view({3, 32, 32});
  testing::write_bytes(dir.path / "in.raw",
                       std::string(reinterpret_cast<const char*>(img.data_ptr<uint8_t>()),
                                   static_cast<size_t>(img.numel())));
  std::string out;
  testing::run_python({"-c", R"(
import sys, numpy as np, torch
import torchvision.transforms.functional as TF
d = sys.argv[1]
x = torch.from_numpy(np.fromfile(d + '/in.raw', np.uint8).reshape(3, 32, 32).copy())
x = TF.pad(x, [4, 4, 4, 4])[:, 2:34, 7:39]      # RandomCrop(32, padding=4) at top=2, left=7
x = TF.hflip(x)
x = x.float() / 255
x = TF.resize(x, [56, 56], antialias=False)
x = TF.normalize(x, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
x.numpy().astype(np.float32).tofile(d + '/out.raw')
)",
                       dir.path.string()});
  std::string ref = testing::read_bytes(dir.path / "out.raw");
  auto want = torch::from_blob(ref.data(), {3, 56, 56}, torch::kFloat32).clone();
  TransformOptions t;
  t.input_size = 56;
  t.augment = true;
  AugmentDecision d{2, 7, 4, true};
  auto got = transform_image(img, d, t);
  const float diff = (got - want).abs().max().item<float>();
  std::cout << "max |gpulab - torchvision| = " << diff << "\n";
  EXPECT_LE(diff, 1e-5f);
}

TEST(DataTransforms, DecisionsStayInRangeAndFlipHalfTheTime) {
  TransformOptions t;
  t.augment = true;
  int flips = 0;
  std::set<int64_t> tops;
  for (int64_t i = 0; i < 4000; ++i) {
    auto d = draw_augment(t, 11, 0, i, 32, 32);
    EXPECT_EQ(d.pad, 4);
    ASSERT_TRUE(d.top >= 0 && d.top <= 8 && d.left >= 0 && d.left <= 8);
    flips += d.flip;
    tops.insert(d.top);
  }
  EXPECT_EQ(tops.size(), 9u);
  // A fair coin over 4,000 draws has a standard deviation of sqrt(0.25 / 4000) = 0.0079: 0.05
  // is 6.3 of them (this seed measured 0.516). A flip decided by a fixed bit or with p = 0.25 is
  // 30 or more deviations out.
  EXPECT_NEAR(flips / 4000.0, 0.5, 0.05);
  EXPECT_EQ(effective_padding(t, 224), 28);
  EXPECT_THROW(parse_normalization("unit"), Exception);
  EXPECT_EQ(parse_normalization("neg_one_one"), Normalization::kNegOneOne);
}

// Throughput of the worker path: CIFAR-sized images at their size and resized to 224.
TEST(DataLoader, ThroughputAt32And224) {
  const int workers = auto_num_workers();
  for (int64_t size : {32, 224}) {
    auto ds = synthetic(size == 32 ? 4096 : 512, {3, 32, 32});
    auto o = augmenting(workers, size);
    o.batch_size = 128;
    DataLoader loader(ds, std::make_shared<RandomSampler>(ds->size(), 0), o);
    run_epoch(loader, 0);  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    auto batches = run_epoch(loader, 1);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double rate = static_cast<double>(ds->size()) / s;
    std::cout << "loader " << size << " px, " << workers << " workers: " << rate << " img/s\n";
    RecordProperty("imgs_per_s_" + std::to_string(size), static_cast<int>(rate));
    EXPECT_GT(rate, 10.0);
  }
}

}  // namespace
}  // namespace gpulab::train
