// Resume gives the same result as an uninterrupted run: 4 epochs equal 2 epochs plus --resume
// for 2 more (same final weights, bit for bit, in --deterministic mode on the CPU), on a small
// subset of the real Fashion-MNIST set; plus a run with every optimization option at once.
#include <gtest/gtest.h>

#include "core/files.h"
#include "core/json.h"
#include "core/strings.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

using testing::run_gpulab;

std::vector<std::string> small_run(const fs::path& out, int epochs) {
  return {"train",
          "--model",
          "resnet18",
          "--dataset",
          "fashion-mnist",
          "--input_size",
          "32",
          "--subset",
          "96",
          "--batch_size",
          "32",
          "--num_epochs",
          std::to_string(epochs),
          "--optimizer",
          "sgd",
          "--nesterov",
          "--learning_rate",
          "0.05",
          "--lr_schedule",
          "step",
          "--step_size",
          "1",
          "--gamma",
          "0.7",
          "--augment",
          "--deterministic",
          "--seed",
          "3",
          "--threads",
          "2",
          "--output_dir",
          out.string()};
}

std::string weights_of(const fs::path& out) {
  auto w = read_file(out / "model.safetensors");
  EXPECT_TRUE(w.ok()) << out;
  return w ? *w : std::string();
}

TEST(TrainerResume, FourEpochsEqualTwoPlusResumeTwo) {
  if (!testing::have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto dir = testing::temp_dir("resume");
  auto full = run_gpulab(small_run(dir / "full", 4));
  ASSERT_EQ(full.exit_code, 0) << full.out << full.err;

  auto first = run_gpulab(small_run(dir / "split", 2));
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  auto args = small_run(dir / "split", 4);
  args.insert(args.end(), {"--resume", "auto"});
  auto second = run_gpulab(args);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("Resumed from"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("ckpt-e0002"), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("Epoch 1/4"), std::string::npos) << "epoch 1 trained again";
  EXPECT_NE(second.out.find("Epoch 3/4"), std::string::npos) << second.out;

  // Same weights, byte for byte, and the same epoch-4 line (loss, accuracy, lr).
  const std::string wf = weights_of(dir / "full"), ws = weights_of(dir / "split");
  ASSERT_FALSE(wf.empty());
  EXPECT_TRUE(wf == ws) << "final weights differ after resume";
  auto metrics = [](const std::string& out) {
    auto p = out.find("Epoch 4/4");
    auto l = out.substr(p, out.find('\n', p) - p);
    auto loss = l.substr(l.find("loss="), 12);
    auto acc = l.substr(l.find("acc="), 10);
    auto lr = l.substr(l.find("lr="));
    return loss + acc + lr;
  };
  EXPECT_EQ(metrics(full.out), metrics(second.out));
  auto test_line = [](const std::string& out) {
    auto p = out.rfind("Test accuracy:");
    return out.substr(p, out.find('\n', p) - p);
  };
  EXPECT_EQ(test_line(full.out), test_line(second.out));

  // The metrics log of the resumed run has all four epochs once each.
  auto log = read_file(dir / "split" / "metrics.jsonl");
  ASSERT_TRUE(log.ok());
  int epochs = 0;
  for (const auto& l : split(*log, '\n'))
    if (parse_json(l)->value("type", "") == "epoch") ++epochs;
  EXPECT_EQ(epochs, 4);
  EXPECT_TRUE(fs::exists(dir / "split" / "report.html"));

  // --resume PATH picks that checkpoint; a run already complete trains nothing.
  auto again = small_run(dir / "split", 4);
  again.insert(again.end(),
               {"--resume", (dir / "split" / "checkpoints" / "ckpt-e0004-s00000012.pt").string()});
  auto r = run_gpulab(again);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Nothing to train"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(TrainerResume, MissingCheckpointPathIsAClearError) {
  const auto out = testing::temp_dir("missing");
  auto r = run_gpulab({"train", "--dataset", "synthetic", "--resume", "/nonexistent/ckpt.pt",
                       "--output_dir", out.string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;  // kNotFound: bad input
  EXPECT_NE(r.err.find("no checkpoint at /nonexistent/ckpt.pt"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(out)) << "bad input wrote into the output folder";
  fs::remove_all(out);
}

TEST(TrainerOptionsRun, EveryOptimizationOptionTogether) {
  if (!testing::have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto dir = testing::temp_dir("allopts");
  for (const std::string opt : {"adamw", "rmsprop"}) {
    auto r = run_gpulab({"train",
                         "--model",
                         "resnet18",
                         "--dataset",
                         "fashion_mnist",
                         "--input_size",
                         "32",
                         "--subset",
                         "64",
                         "--batch_size",
                         "16",
                         "--num_epochs",
                         "2",
                         "--optimizer",
                         opt,
                         "--learning_rate",
                         "0.001",
                         "--lr_schedule",
                         "cosine",
                         "--warmup_epochs",
                         "0.5",
                         "--label_smoothing",
                         "0.1",
                         "--clip_grad",
                         "1.0",
                         "--grad_accum",
                         "2",
                         "--precision",
                         "bf16",
                         "--channels_last",
                         "--output_dir",
                         (dir / opt).string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("2 steps per epoch, grad_accum 2"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Precision: bf16, channels_last"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Training took"), std::string::npos) << r.out;
  }
  auto r = run_gpulab({"train", "--dataset", "fashion-mnist", "--subset", "16", "--input_size",
                       "32", "--precision", "tf32", "--max_steps", "1", "--no_checkpoints",
                       "--output_dir", (dir / "tf32").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tf32 has no effect on the CPU"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
