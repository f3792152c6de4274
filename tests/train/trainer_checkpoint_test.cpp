// Tests of checkpoint files: round trip of model, optimizer and RNG state; only complete,
// matching checkpoints count; retention.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>

#include "core/files.h"
#include "core/json.h"
#include "train/checkpoint.h"
#include "train/optim/optimizers.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

struct Net : torch::nn::Module {
  torch::nn::Linear fc1{4, 8}, fc2{8, 2};
  torch::nn::BatchNorm1d bn{8};
  Net() {
    register_module("fc1", fc1);
    register_module("bn", bn);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(bn(fc1(x)))); }
};

// A few Adam steps so the optimizer has state (moments, step counts).
void train_steps(Net& net, torch::optim::Optimizer& opt, int n) {
  for (int i = 0; i < n; ++i) {
    opt.zero_grad();
    auto x = torch::randn({16, 4});
    auto loss = net.forward(x).pow(2).mean();
    loss.backward();
    opt.step();
  }
}

TEST(TrainerCheckpoint, RoundTripContinuesIdentically) {
  const auto dir = testing::temp_dir("ckpt_roundtrip");
  torch::manual_seed(1);
  Net a;
  auto opt_a = make_optimizer({"adam", 0.01, 0.01, 0.9, false}, a);
  train_steps(a, *opt_a, 3);
  TrainState s;
  s.epoch = 3;
  s.step = 30;
  s.seed = 7;
  s.scaler = {512.0, 5, 1};
  s.history = Json::array({Json{{"epoch", 1}, {"train_loss", 0.5}}});
  auto info = save_checkpoint(dir, s, a, *opt_a, 2);
  EXPECT_TRUE(fs::exists(info.file));
  EXPECT_TRUE(fs::exists(info.manifest));

  // Continue A; restore B from the checkpoint and continue it the same way.
  train_steps(a, *opt_a, 2);
  torch::manual_seed(99);  // different RNG and weights: the checkpoint must restore both
  Net b;
  auto opt_b = make_optimizer({"adam", 0.01, 0.01, 0.9, false}, b);
  auto found = find_resumable(dir);
  ASSERT_TRUE(found.has_value());
  auto loaded = load_checkpoint(*found, b, *opt_b);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->epoch, 3);
  EXPECT_EQ(loaded->step, 30);
  EXPECT_EQ(loaded->seed, 7);
  EXPECT_DOUBLE_EQ(loaded->scaler.scale, 512.0);
  EXPECT_EQ(loaded->history.size(), 1u);
  train_steps(b, *opt_b, 2);
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (const auto& p : pa) EXPECT_TRUE(torch::equal(p.value(), pb[p.key()])) << p.key();
  EXPECT_TRUE(torch::equal(a.bn->running_mean, b.bn->running_mean));
  fs::remove_all(dir);
}

TEST(TrainerCheckpoint, IncompleteOrDamagedOnesDoNotCount) {
  const auto dir = testing::temp_dir("ckpt_damaged");
  Net net;
  auto opt = make_optimizer({"sgd", 0.1, 0, 0.9, false}, net);
  TrainState s;
  s.epoch = 1;
  auto first = save_checkpoint(dir, s, net, *opt, 5);
  s.epoch = 2;
  auto second = save_checkpoint(dir, s, net, *opt, 5);
  ASSERT_EQ(find_resumable(dir)->epoch, 2);

  // Truncated bytes under a manifest: skipped for the previous one.
  fs::resize_file(second.file, fs::file_size(second.file) / 2);
  auto r = find_resumable(dir);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->epoch, 1);
  EXPECT_FALSE(load_checkpoint(second, net, *opt).ok());

  // A file without a manifest (killed between rename and manifest) is not listed at all.
  fs::remove(second.manifest);
  for (const auto& c : list_checkpoints(dir)) EXPECT_NE(c.epoch, 2);
  EXPECT_FALSE(checkpoint_at(second.file).ok());

  // Nothing complete: nothing to resume.
  fs::remove(first.manifest);
  EXPECT_FALSE(find_resumable(dir).has_value());
  fs::remove_all(dir);
}

// The manifest's CRC-32 catches a changed byte that keeps the size; a manifest of an older
// gpulab (FNV-1a 64, "fnv1a64") still vouches for its checkpoint, and one of an algorithm this
// build does not know vouches for nothing.
TEST(TrainerCheckpoint, TheManifestChecksumCatchesAFlippedByteAndOlderOnesStillCount) {
  const auto dir = testing::temp_dir("ckpt_checksum");
  Net net;
  auto opt = make_optimizer({"sgd", 0.1, 0, 0.9, false}, net);
  TrainState s;
  s.epoch = 1;
  const auto info = save_checkpoint(dir, s, net, *opt, 5);
  const std::string bytes = read_file(info.file).value();
  Json m = parse_json(read_file(info.manifest).value(), "manifest").value();
  EXPECT_EQ(m["checksum_algorithm"], "crc32");
  EXPECT_EQ(m["checksum"], checksum_hex(bytes));
  EXPECT_EQ(m["checksum"].get<std::string>().size(), 8u);

  std::string flipped = bytes;
  flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x10);
  ASSERT_TRUE(write_file_atomic(info.file, flipped).ok());
  EXPECT_FALSE(find_resumable(dir).has_value());
  auto bad = load_checkpoint(info, net, *opt);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("does not match its manifest"), std::string::npos);

  ASSERT_TRUE(write_file_atomic(info.file, bytes).ok());
  uint64_t fnv = 0xcbf29ce484222325ULL;  // the older manifests' FNV-1a 64
  for (unsigned char c : bytes) fnv = (fnv ^ c) * 0x100000001b3ULL;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv));
  const auto write_manifest = [&](const std::string& algorithm, const std::string& sum) {
    m["checksum_algorithm"] = algorithm;
    m["checksum"] = sum;
    ASSERT_TRUE(write_file_atomic(info.manifest, m.dump(2)).ok());
  };
  write_manifest("fnv1a64", hex);
  ASSERT_TRUE(find_resumable(dir).has_value());
  EXPECT_TRUE(load_checkpoint(info, net, *opt).ok());
  write_manifest("fnv1a64", checksum_hex(bytes));  // a CRC where an FNV belongs
  EXPECT_FALSE(find_resumable(dir).has_value());
  write_manifest("sha3-256", hex);
  EXPECT_FALSE(find_resumable(dir).has_value());
  fs::remove_all(dir);
}

TEST(TrainerCheckpoint, KeepsOnlyTheNewestAndCleansLeftovers) {
  const auto dir = testing::temp_dir("ckpt_keep");
  Net net;
  auto opt = make_optimizer({"sgd", 0.1, 0, 0.9, false}, net);
  std::ofstream(dir / "ckpt-e0009-s00000009.pt.tmp-12345") << "partial";
  TrainState s;
  for (int e = 1; e <= 4; ++e) {
    s.epoch = e;
    s.step = e * 10;
    save_checkpoint(dir, s, net, *opt, 2);
  }
  auto all = list_checkpoints(dir);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].epoch, 4);
  EXPECT_EQ(all[1].epoch, 3);
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 4);  // two .pt + two .json; the stale temporary is gone
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
