// `gpulab train --task grpo` end to end on the CPU: a tiny decoder pre-trained here on noisy
// "a+b=" sums (the right digit 30 % of the time) is fine-tuned with GRPO on the answer reward and
// its mean reward rises by a stated margin within a bounded number of steps, while the same run
// with the learning rate turned down to nothing does not rise; a run stopped by SIGINT resumes
// from its checkpoint; bad input is refused with exit 2 before any rank starts.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <random>
#include <thread>

#include "core/files.h"
#include "train/models/decoder_config.h"
#include "train/models/lm_families.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"
#include "train/weights_export.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;
using testing::run_gpulab;

// One digit a, b in 0..4 each: 25 prompts whose answers are single digits 0..8.
constexpr int kDigits = 5;

// The prompts file: every "a+b=" once, its sum in `answer`.
fs::path write_adder_prompts(const fs::path& dir) {
  const fs::path file = dir / "adder.jsonl";
  std::ofstream out(file);
  for (int a = 0; a < kDigits; ++a)
    for (int b = 0; b < kDigits; ++b)
      out << Json{{"prompt", fmt::format("{}+{}=", a, b)}, {"answer", a + b}}.dump() << "\n";
  return file;
}

// A 2-layer, 32-wide Llama over bytes, trained on "a+b=c" where c is the sum with probability
// 0.3 and otherwise a uniform digit: it learns p(right digit) ~ 0.3 + 0.7 / 10 = 0.37 and puts
// its mass on digits, so GRPO has something to raise (measured: ~0.3 before GRPO). Written as a
// Hugging Face folder; with 0 steps, its random initialisation (for tests that need no skill).
fs::path pretrain_adder(const fs::path& dir, int pretrain_steps) {
  DecoderConfig cfg = find_decoder_config("llama-tiny").value_or_throw();
  cfg.name = "adder";
  cfg.vocab_size = 256;
  cfg.vocab_from_data = false;
  cfg.hidden_size = 32;
  cfg.intermediate_size = 64;
  cfg.num_layers = 2;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 4;
  cfg.max_positions = 16;
  torch::manual_seed(0);
  at::set_num_threads(1);  // a tiny model: one thread, no hand-offs between cores
  auto model = build_causal_lm(cfg);
  model->train();
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
  std::mt19937 rng(0);
  std::uniform_int_distribution<int> digit(0, kDigits - 1), any(0, 9);
  std::uniform_real_distribution<double> coin(0, 1);
  constexpr int kBatch = 64;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < pretrain_steps; ++step) {
    auto inputs = torch::empty({kBatch, 4}, torch::kLong);
    auto target = torch::empty({kBatch}, torch::kLong);
    auto in = inputs.accessor<int64_t, 2>();
    auto tg = target.accessor<int64_t, 1>();
    for (int i = 0; i < kBatch; ++i) {
      const int a = digit(rng), b = digit(rng);
      const int c = coin(rng) < 0.3 ? a + b : any(rng);
      in[i][0] = '0' + a, in[i][1] = '+', in[i][2] = '0' + b, in[i][3] = '=';
      tg[i] = '0' + c;
    }

    const auto logits = model->forward(inputs).select(1, 3);
    const auto loss = torch::nn::functional::cross_entropy(logits, target);
    opt.zero_grad();
    loss.backward();
    opt.step();
  }
  std::cout << "pre-trained the adder in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
  const fs::path out = dir / "adder";
  write_hf_folder(out, cfg, module_state_dict(*model), "bytes", "grpo_train_test");
  return out;
}

// The pre-trained adder (500 steps, ~15 s on a shared 2-core machine) or an untrained one, and
// the prompts beside it; each built once per test process.
fs::path adder_folder(const std::string& name, int pretrain_steps) {
  const auto d = testing::temp_dir(name);
  pretrain_adder(d, pretrain_steps);
  write_adder_prompts(d);
  return d;
}
const fs::path& trained_adder() {
  static const fs::path dir = adder_folder("grpo_adder", 500);
  return dir;
}
const fs::path& untrained_adder() {
  static const fs::path dir = adder_folder("grpo_untrained", 0);
  return dir;
}

std::vector<std::string> grpo_args(const fs::path& out, const std::string& lr, int epochs,
                                   int batch, const fs::path& d = trained_adder()) {
  return {"train",
          "--task",
          "grpo",
          "--weights",
          (d / "adder").string(),
          "--prompts",
          (d / "adder.jsonl").string(),
          "--group_size",
          "8",
          "--batch_size",
          std::to_string(batch),
          "--max_new_tokens",
          "1",
          "--temperature",
          "1",
          "--top_k",
          "0",
          "--learning_rate",
          lr,
          "--num_epochs",
          std::to_string(epochs),
          "--seed",
          "1",
          "--device",
          "cpu",
          "--no_report",
          "--output_dir",
          out.string()};
}

// args with --flag's value replaced (the command line takes each flag once).
std::vector<std::string> with_flag(std::vector<std::string> args, const std::string& flag,
                                   const std::string& value) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) {
      args[i + 1] = value;
      return args;
    }
  args.push_back(flag);
  args.push_back(value);
  return args;
}

// The "step" records of a run's metrics.jsonl: step -> record.
std::map<int64_t, Json> step_records(const fs::path& run_dir) {
  std::map<int64_t, Json> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = Json::parse(line);
    if (j.value("type", "") == "step") out[j.value("step", int64_t{0})] = j;
  }
  return out;
}

// Mean of mean_reward over steps [first, last].
double mean_reward(const std::map<int64_t, Json>& steps, int64_t first, int64_t last) {
  double sum = 0;
  for (int64_t s = first; s <= last; ++s) sum += steps.at(s).value("mean_reward", 0.0);
  return sum / static_cast<double>(last - first + 1);
}

// 30 steps, each all 25 prompts x 8 completions = 200 samples, lr 5e-3 (AdamW). The first and
// last 5 steps' rewards are means of 1000 Bernoulli draws each: at p ~ 0.3 their standard error is
// sqrt(0.3 * 0.7 / 1000) = 0.015, so a difference of two such means has ~0.021 of noise. A gain
// of 0.25 is over 10 of those, and the pre-trained model leaves room for it (~0.3 -> 1; measured
// when this test was written: 0.33 -> 0.75). The control (lr 1e-9: each weight moves by ~1e-9,
// far below what changes a sampled digit) must stay below the same margin, so a GRPO that does
// not learn fails here.
constexpr double kMargin = 0.25;

TEST(GrpoTrain, RaisesTheMeanRewardOfAPretrainedAdder) {
  const auto dir = testing::temp_dir("grpo_learn");
  // With its report (the reward curve), without checkpoints (one a step here).
  auto on_args = grpo_args(dir / "on", "5e-3", 30, 25);
  on_args.erase(std::find(on_args.begin(), on_args.end(), "--no_report"));
  on_args.push_back("--no_checkpoints");
  const auto trained = run_gpulab(on_args, 600);
  ASSERT_EQ(trained.exit_code, 0) << trained.out << trained.err;
  auto off_args = grpo_args(dir / "off", "1e-9", 30, 25);
  off_args.push_back("--no_checkpoints");
  const auto off = run_gpulab(off_args, 600);
  ASSERT_EQ(off.exit_code, 0) << off.out << off.err;
  const auto on_steps = step_records(dir / "on"), off_steps = step_records(dir / "off");
  ASSERT_EQ(on_steps.size(), 30u) << trained.out;
  ASSERT_EQ(off_steps.size(), 30u) << off.out;
  const double on_first = mean_reward(on_steps, 1, 5), on_last = mean_reward(on_steps, 26, 30);
  const double off_first = mean_reward(off_steps, 1, 5), off_last = mean_reward(off_steps, 26, 30);
  std::cout << fmt::format(
      "GRPO lr 5e-3: mean reward steps 1-5 {:.3f} -> steps 26-30 {:.3f} (gain {:+.3f}); "
      "lr 1e-9: {:.3f} -> {:.3f} (gain {:+.3f}); margin {:.2f}\n",
      on_first, on_last, on_last - on_first, off_first, off_last, off_last - off_first, kMargin);
  EXPECT_GE(on_last - on_first, kMargin) << trained.out;
  EXPECT_LT(off_last - off_first, kMargin) << off.out;
  // The figures a GRPO step reports, in the line and the log.
  EXPECT_NE(trained.out.find("Step 30/30: reward "), std::string::npos) << trained.out;
  for (const char* key : {"reward_std", "kl", "clip_fraction", "completion_length",
                          "generation_tokens_per_s", "training_tokens_per_s", "generation_share"})
    EXPECT_TRUE(on_steps.at(30).contains(key)) << key;
  EXPECT_DOUBLE_EQ(on_steps.at(30).value("completion_length", 0.0), 1.0);
  const std::string report = read_file(dir / "on" / "report.html").value_or("");
  EXPECT_NE(report.find("Mean reward"), std::string::npos);
}

// Starts gpulab with `args`, stdout and stderr into `log`.
pid_t spawn_gpulab(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv{GPULAB_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  return pid;
}

// Ctrl-C after step 7 (inside epoch 2): exit 130 with a checkpoint of where it stopped; the same
// command with --resume auto goes on from that step and ends with every step logged once.
TEST(GrpoTrain, StoppedBySigintResumesFromItsCheckpoint) {
  const auto dir = testing::temp_dir("grpo_sigint");
  auto args = grpo_args(dir / "run", "5e-3", 4, 5, untrained_adder());
  const pid_t pid = spawn_gpulab(args, dir / "first.log");
  ASSERT_GT(pid, 0);
  bool reached = false;
  for (int i = 0; i < 2400 && !reached; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reached = step_records(dir / "run").size() >= 7;
    int status = 0;
    if (!reached && ::waitpid(pid, &status, WNOHANG) == pid)
      FAIL() << "the run ended before step 7: " << read_file(dir / "first.log").value_or("");
  }
  ASSERT_TRUE(reached) << read_file(dir / "first.log").value_or("");
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string first = read_file(dir / "first.log").value_or("");
  ASSERT_TRUE(WIFEXITED(status)) << first;
  EXPECT_EQ(WEXITSTATUS(status), 130) << first;
  EXPECT_NE(first.find("Stopped by SIGINT"), std::string::npos) << first;
  const auto stopped_at = static_cast<int64_t>(step_records(dir / "run").size());

  args = with_flag(args, "--resume", "auto");
  const auto second = run_gpulab(args, 600);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_NE(second.out.find("Resumed from"), std::string::npos) << second.out;
  EXPECT_NE(second.out.find(fmt::format("Step {}/20", stopped_at + 1)), std::string::npos)
      << second.out;
  const auto steps = step_records(dir / "run");
  ASSERT_EQ(steps.size(), 20u) << second.out;
  EXPECT_EQ(steps.begin()->first, 1);
  EXPECT_EQ(steps.rbegin()->first, 20);
  std::cout << "stopped after step " << stopped_at << ", resumed to step 20\n";
}

// Each refused before a rank starts (--nproc_per_node 2): exit 2, the message and no run folder.
TEST(GrpoTrain, BadInputIsRefusedBeforeAnyRankStarts) {
  const auto dir = testing::temp_dir("grpo_bad");
  ASSERT_TRUE(
      write_file_atomic(dir / "bad.jsonl", "{\"prompt\": \"1+1=\", \"answer\": 2}\n{oops\n"));
  ASSERT_TRUE(write_file_atomic(dir / "empty.jsonl", "\n"));
  const auto base = [&](const fs::path& out) {
    auto a = grpo_args(out, "1e-3", 1, 5, untrained_adder());
    a.insert(a.end(), {"--nproc_per_node", "2"});
    return a;
  };
  struct Case {
    std::vector<std::string> extra;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--prompts", (dir / "bad.jsonl").string()}, "bad.jsonl:2"},
      {{"--prompts", (dir / "empty.jsonl").string()}, "empty.jsonl"},
      {{"--group_size", "1"}, "--group_size 1 leaves no advantage"},
      {{"--max_new_tokens", "13"}, "--max_new_tokens 13 exceed"},
      {{"--reward", "answer+0.5*vibes"}, "unknown reward 'vibes'"},
      {{"--reward", "regex"}, "--reward_regex is empty"},
      {{"--batch_size", "13"}, "fewer than one step takes"},
      {{"--shard", "full"}, "does not run with --shard full"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path out = dir / ("run" + std::to_string(i));
    const auto args = with_flag(base(out), cases[i].extra[0], cases[i].extra[1]);
    const auto r = run_gpulab(args, 120);
    EXPECT_EQ(r.exit_code, 2) << cases[i].says << "\n" << r.out << r.err;
    EXPECT_NE((r.out + r.err).find(cases[i].says), std::string::npos) << r.out << r.err;
    EXPECT_FALSE(fs::exists(out)) << cases[i].says;
  }
}

}  // namespace
}  // namespace gpulab::train
