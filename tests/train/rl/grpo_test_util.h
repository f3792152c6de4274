// The GRPO CLI tests' shared pieces: a tiny byte-level adder decoder (pre-trained here, or
// untrained) with its "a+b=" prompts, the command line that fine-tunes it, and the step records
// a run leaves.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/files.h"
#include "core/json.h"
#include "train/models/decoder_config.h"
#include "train/models/lm_families.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"
#include "train/weights_export.h"

namespace gpulab::train::grpo_testing {

namespace fs = std::filesystem;

// One digit a, b in 0..4 each: 25 prompts whose answers are single digits 0..8.
constexpr int kDigits = 5;

// The prompts file: every "a+b=" once, its sum in `answer`.
inline fs::path write_adder_prompts(const fs::path& dir) {
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
inline fs::path pretrain_adder(const fs::path& dir, int pretrain_steps) {
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
  write_hf_folder(out, cfg, module_state_dict(*model), "bytes", "grpo_train_test",
                  std::numeric_limits<uint64_t>::max());
  return out;
}

// The pre-trained adder (500 steps, ~15 s on a shared 2-core machine) or an untrained one, and
// the prompts beside it; each built once per test process.
inline fs::path adder_folder(const std::string& name, int pretrain_steps) {
  const auto d = testing::temp_dir(name);
  pretrain_adder(d, pretrain_steps);
  write_adder_prompts(d);
  return d;
}
inline const fs::path& trained_adder() {
  static const fs::path dir = adder_folder("grpo_adder", 500);
  return dir;
}
inline const fs::path& untrained_adder() {
  static const fs::path dir = adder_folder("grpo_untrained", 0);
  return dir;
}

inline std::vector<std::string> grpo_args(const fs::path& out, const std::string& lr, int epochs,
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
inline std::vector<std::string> with_flag(std::vector<std::string> args, const std::string& flag,
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
inline std::map<int64_t, Json> step_records(const fs::path& run_dir) {
  std::map<int64_t, Json> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = Json::parse(line);
    if (j.value("type", "") == "step") out[j.value("step", int64_t{0})] = j;
  }
  return out;
}

// Starts gpulab with `args`, stdout and stderr into `log`.
// `binary` (GPULAB_BINARY, or GPULAB_HOOKS_BINARY for the test hooks), with `env` added.
inline pid_t spawn_gpulab(const std::vector<std::string>& args, const fs::path& log,
                          const char* binary = GPULAB_BINARY,
                          const std::map<std::string, std::string>& env = {}) {
  std::vector<std::string> argv{binary};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  return pid;
}

// A run stopped by Ctrl-C: its wait status and its output.
struct InterruptedRun {
  int status = -1;  // -1: it ended, or never reached `steps`, before the SIGINT (a failure added)
  std::string log;
};

// Starts gpulab with `args` (output into `log`), sends SIGINT once `run_dir` holds `steps` step
// records, and waits for it to end.
inline InterruptedRun interrupt_after_steps(const std::vector<std::string>& args,
                                            const fs::path& run_dir, const fs::path& log,
                                            size_t steps) {
  InterruptedRun r;
  const pid_t pid = spawn_gpulab(args, log);
  if (pid <= 0) {
    ADD_FAILURE() << "cannot start gpulab";
    return r;
  }
  bool reached = false;
  int status = 0;
  for (int i = 0; i < 2400 && !reached; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reached = step_records(run_dir).size() >= steps;
    if (!reached && ::waitpid(pid, &status, WNOHANG) == pid) break;
  }
  if (reached) {
    ::kill(pid, SIGINT);
    ::waitpid(pid, &status, 0);
    r.status = status;
  } else {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  r.log = read_file(log).value_or("");
  if (!reached) ADD_FAILURE() << "the run ended before step " << steps << ": " << r.log;
  return r;
}

}  // namespace gpulab::train::grpo_testing
