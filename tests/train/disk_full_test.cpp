// Issue 30 item 4 for the trainer: a checkpoint and `gpulab data tokenize` into a filesystem that
// fills up (a small tmpfs, root only) fail with one clear error naming the path and the space
// needed, keep the previous good state, and leave no partial file. The sharded checkpoint's
// shards and index go through core's write_file_atomic, which tests/core/disk_full_test.cpp
// fills the same way.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "support/small_tmpfs.h"
#include "train/checkpoint.h"
#include "train/data/tokenize_corpus.h"
#include "train/optim/optimizers.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

bool any_partial(const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(), [](const std::string& n) {
    return n.find(".tmp") != std::string::npos || n.find(".partial") != std::string::npos;
  });
}

TEST(DiskFull, CheckpointSaysWhatItNeededAndTheLastOneStillResumes) {
  gpulab::testing::SmallTmpfs disk(4 << 20);
  if (!disk.why_not.empty()) GTEST_SKIP() << disk.why_not;
  torch::manual_seed(1);
  torch::nn::Linear net(64, 256);  // about 66 KB of weights, twice that with Adam's moments
  auto opt = make_optimizer({"adam", 0.01, 0.0, 0.9, false}, *net);
  const auto dir = disk.path / "ckpt";
  TrainState s;
  s.epoch = 1;
  s.step = 10;
  auto first = save_checkpoint(dir, s, *net, *opt, 3);
  const auto size = fs::file_size(first.file);
  disk.fill(size / 2);
  s.epoch = 2;
  s.step = 20;
  try {
    save_checkpoint(dir, s, *net, *opt, 3);
    FAIL() << "the save into a full disk succeeded";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kResourceExhausted);
    const std::string m = e.what();
    EXPECT_NE(m.find("not enough disk space for " + (dir / "ckpt-e0002-s00000020.pt").string()),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("it needs "), std::string::npos) << m;
    EXPECT_NE(m.find(" free"), std::string::npos) << m;
  }
  EXPECT_FALSE(any_partial(disk.names(dir)));
  auto found = find_resumable(dir);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->epoch, 1);
  auto loaded = load_checkpoint(*found, *net, *opt);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->step, 10);
}

TEST(DiskFull, TokenizeSaysWhatTheFolderNeedsAndKeepsTheOldData) {
  gpulab::testing::SmallTmpfs disk(1 << 20);
  if (!disk.why_not.empty()) GTEST_SKIP() << disk.why_not;
  const auto src = testing::temp_dir("disk_full_text");
  {
    std::ofstream small(src / "small.txt"), big(src / "big.txt");
    for (int i = 0; i < 200; ++i) small << "a short line of text, number " << i << "\n";
    for (int i = 0; i < 6000; ++i)
      big << "a longer corpus needs more room than is left " << i << "\n";
  }
  const auto out = disk.path / "tok";
  ASSERT_TRUE(
      tokenize_corpus(
          {.inputs = {src / "small.txt"}, .out_dir = out, .val_fraction = 0.5, .block_bytes = 256},
          {})
          .ok());
  const auto before = *read_file(out / "meta.json");
  disk.fill(64 << 10);
  auto r = tokenize_corpus({.inputs = {src / "big.txt"}, .out_dir = out, .overwrite = true}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kResourceExhausted);
  const auto text_bytes = fs::file_size(src / "big.txt");
  EXPECT_NE(r.error().message.find("not enough disk space for " + out.string() + ": it needs " +
                                   std::to_string(2 * text_bytes) + " bytes"),
            std::string::npos)
      << r.error().message;
  EXPECT_FALSE(any_partial(disk.names(out)));
  EXPECT_EQ(*read_file(out / "meta.json"), before);
  EXPECT_TRUE(TokenData::open(out).ok());  // checksums of the old splits still match
  // Through the CLI: exit 3 (the environment is not ready), the same error line.
  auto cli = testing::run_gpulab({"data", "tokenize", "--input", (src / "big.txt").string(),
                                  "--tokenizer", "bytes", "--out", (disk.path / "tok2").string()});
  EXPECT_EQ(cli.exit_code, 3) << cli.err;
  EXPECT_NE(cli.err.find("error: not enough disk space for " + (disk.path / "tok2").string()),
            std::string::npos)
      << cli.err;
  EXPECT_FALSE(fs::exists(disk.path / "tok2"));
  fs::remove_all(src);
}

}  // namespace
}  // namespace gpulab::train
