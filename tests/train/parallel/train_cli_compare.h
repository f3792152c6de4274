// What the model-parallel CLI tests (`gpulab train --pp`, --tp) compare: two run folders' epoch
// losses, exported and checkpointed weights, relative to the values' own size, and the command
// lines they run.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train/run_files.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::testing {

inline std::vector<std::string> with(std::vector<std::string> args,
                                     const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// The command line with --flag's value replaced (a flag given twice is refused).
inline std::vector<std::string> set_flag(std::vector<std::string> args, const std::string& flag,
                                         const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) args[i + 1] = value;
  return args;
}

// 5 epochs of one step each (4 x 16 tokens), fp64, global-norm clipping; SGD with momentum
// unless `adamw`.
inline std::vector<std::string> tiny_run(const fs::path& out, int epochs, bool adamw = false,
                                         const std::string& model = "llama-tiny") {
  std::vector<std::string> args = {"train",
                                   "--model",
                                   model,
                                   "--dataset",
                                   "synthetic-text",
                                   "--seq_len",
                                   "16",
                                   "--batch_size",
                                   "4",
                                   "--weight_decay",
                                   "0.1",
                                   "--lr_schedule",
                                   "none",
                                   "--clip_grad",
                                   "1.0",
                                   "--num_epochs",
                                   std::to_string(epochs),
                                   "--limit_train_batches",
                                   "1",
                                   "--limit_eval_batches",
                                   "1",
                                   "--device",
                                   "cpu",
                                   "--precision",
                                   "fp64",
                                   "--threads",
                                   "1",
                                   "--backend",
                                   "gloo",
                                   "--output_dir",
                                   out.string(),
                                   "--no_report"};
  const std::vector<std::string> opt =
      adamw ? std::vector<std::string>{"--optimizer", "adamw", "--learning_rate", "3e-3"}
            : std::vector<std::string>{"--optimizer",     "sgd", "--momentum", "0.9",
                                       "--learning_rate", "0.1"};
  return with(args, opt);
}

// The newest checkpoint's model tensors (the ordinary layout, whatever the run's layout), read
// as `gpulab export` reads them.
inline StateDict newest_checkpoint_weights(const fs::path& run) {
  auto ckpt = find_resumable(run / "checkpoints");
  EXPECT_TRUE(ckpt.has_value());
  if (!ckpt) return {};
  auto files = locate_model_files(ckpt->manifest).value();
  return read_model_weights(files).value();
}

// A run folder's final weights, read as every command reads them: model.safetensors, or Hugging
// Face's shards and their index (--max_shard_size).
inline StateDict run_weights(const fs::path& run) {
  auto files = locate_model_files(run).value();
  return read_model_weights(files).value();
}

// The runs' folders, once compared.
inline void remove_all(std::initializer_list<fs::path> dirs) {
  for (const auto& d : dirs) fs::remove_all(d);
}

inline ProcessResult run_ok(const std::vector<std::string>& args) {
  auto r = run_gpulab(args, 600);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return r;
}

// A layout the CLI refuses: exit 2 naming `says` and `hint`, before any rank started and before
// anything was written to `out`; the refusal's line printed, for the test log.
inline void expect_refused(const std::vector<std::string>& args, const fs::path& out,
                           const std::string& says, const std::string& hint) {
  auto r = run_gpulab(args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(hint), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("Hello from"), std::string::npos) << "a rank started: " << r.out;
  EXPECT_FALSE(fs::exists(out)) << "bad input wrote " << out;
  const auto at = r.err.find("error:");
  if (at != std::string::npos)
    std::printf("refused: %s\n", r.err.substr(at, r.err.find('\n', at) - at).c_str());
}

// The model-parallel CLI tests' bounds against one process. Both runs compute the same fp64 sums
// in another order (a row-parallel product adds partial sums, a vocabulary-parallel loss sums
// exponentials per rank, stages meet over messages), each off by a few ulps (2.2e-16 relative);
// SGD carries that through five steps about linearly (kTol: a thousand-fold margin; a missing
// gradient sum, a wrong shard or other data shows at 1e-3 or more). Adam's first update
// lr g / (|g| + eps) turns a gradient difference d into lr / eps d = 3e5 d where |g| is near eps,
// ~1e-10 after five steps (measured 1.2e-10): kAdamTol 1e-8, far below a lost moment (~lr).
// Training losses are summed in the loop's float32 accumulator: kFloatUlp.
inline constexpr double kTol = 1e-12;
inline constexpr double kAdamTol = 1e-8;
inline const double kFloatUlp = std::ldexp(1.0, -23);

// Two pipeline stages, one rank each.
inline const std::vector<std::string> kPp2 = {"--pp", "2", "--nproc_per_node", "2"};

inline double rel(double a, double b) {
  return std::abs(a - b) / std::max({std::abs(a), std::abs(b), 1e-300});
}

// Each epoch's validation loss within `tol` and training loss within `train_tol` (the loop sums
// training losses in a float32 accumulator, so equal runs may differ there by a float ulp). The
// defaults: fp64 runs that sum the same terms in another order.
inline void expect_same_losses(const fs::path& a, const fs::path& b, size_t epochs,
                               double tol = kTol, double train_tol = kFloatUlp) {
  const auto ea = epoch_records(a), eb = epoch_records(b);
  ASSERT_EQ(ea.size(), epochs);
  ASSERT_EQ(eb.size(), epochs);
  double worst = 0;
  for (size_t i = 0; i < epochs; ++i) {
    const double x = ea[i]["test_loss"], y = eb[i]["test_loss"];
    EXPECT_LE(rel(x, y), tol) << "validation loss of step " << i + 1 << ": " << x << " vs " << y;
    worst = std::max(worst, rel(x, y));
    const double u = ea[i]["train_loss"], v = eb[i]["train_loss"];
    EXPECT_LE(rel(u, v), train_tol) << "training loss of step " << i + 1;
  }
  std::printf("largest relative validation-loss difference: %.3g\n", worst);
}

// Every tensor of the two exports within `tol` of its largest element (0: bit for bit).
inline void expect_same_weights(const fs::path& a, const fs::path& b, double tol) {
  auto wa = run_weights(a);
  auto wb = run_weights(b);
  ASSERT_EQ(wa.size(), wb.size());
  double worst = 0;
  for (const auto& [name, t] : wa) {
    ASSERT_TRUE(wb.count(name)) << name;
    ASSERT_EQ(t.sizes(), wb.at(name).sizes()) << name;
    const double scale = std::max(t.abs().max().item<double>(), 1e-300);
    worst = std::max(worst, (t - wb.at(name)).abs().max().item<double>() / scale);
  }
  EXPECT_LE(worst, tol);
  std::printf("largest relative weight difference: %.3g\n", worst);
}

// A bf16 model-parallel run (`split`) against fp32 (`f32`) and one-process bf16 (`b16`) runs of
// `epochs` epochs: its validation losses track fp32's within bf16's own rounding noise. One
// process in bf16 deviates from fp32 by d (bf16 keeps 8 significant bits; every product's output
// is rounded to 2^-9 relative). The split run is another draw of the same noise (its sums are
// rounded in other places), so it lies within d of one-process bf16 give or take its own d: 3 d
// covers both draws with a margin, and at least one bf16 ulp of the loss (2^-8 relative) so that
// a lucky small d does not make it flaky. A missing gradient sum or a wrong shard moves the loss
// far more.
inline void expect_bf16_tracks_fp32(const fs::path& f32, const fs::path& b16, const fs::path& split,
                                    size_t epochs, const char* what) {
  const auto ef = epoch_records(f32), eb = epoch_records(b16), et = epoch_records(split);
  ASSERT_EQ(ef.size(), epochs);
  ASSERT_EQ(eb.size(), epochs);
  ASSERT_EQ(et.size(), epochs);
  double d = 0;
  for (size_t i = 0; i < epochs; ++i) d = std::max(d, rel(eb[i]["test_loss"], ef[i]["test_loss"]));
  const double bound = std::max(3 * d, std::ldexp(1.0, -8));
  double worst = 0;
  for (size_t i = 0; i < epochs; ++i) {
    const double x = et[i]["test_loss"], y = ef[i]["test_loss"];
    EXPECT_LT(rel(x, y), bound) << "validation loss of step " << i + 1 << ": " << x << " vs " << y;
    worst = std::max(worst, rel(x, y));
  }
  std::printf(
      "bf16 vs fp32, largest relative validation-loss difference: one process %.3g, %s %.3g "
      "(bound %.3g)\n",
      d, what, worst, bound);
}

// The run's exported weights (rewritten by a resume that has nothing left to train) equal the
// newest checkpoint's tensors bit for bit, and `gpulab export` of that checkpoint writes them.
inline void expect_export_is_checkpoint(const fs::path& run) {
  const auto exported = run_weights(run);
  const auto saved = newest_checkpoint_weights(run);
  ASSERT_EQ(saved.size(), exported.size());
  for (const auto& [name, t] : exported)
    EXPECT_TRUE(saved.count(name) && torch::equal(saved.at(name), t)) << run << ": " << name;
  // `gpulab export` of the checkpoint (joined tensor by tensor as it writes): the same file.
  const auto ckpt = find_resumable(run / "checkpoints");
  ASSERT_TRUE(ckpt.has_value());
  run_ok(
      {"export", "--checkpoint", ckpt->manifest.string(), "--output", (run / "exported").string()});
  const auto again = read_safetensors(run / "exported" / "model.safetensors").value().tensors;
  ASSERT_EQ(again.size(), exported.size());
  for (const auto& [name, t] : exported)
    EXPECT_TRUE(again.count(name) && torch::equal(again.at(name), t)) << "export: " << name;
}

}  // namespace gpulab::train::testing
