// `gpulab bench parity`: one forward and backward pass on a device against the CPU in float64
// (bench::run_parity), for checking a GPU host's numerics before trusting its speed.
#include <iostream>
#include <memory>

#include "bench/device_parity.h"
#include "commands.h"
#include "json_stdout.h"

namespace gpulab::cli {

void add_bench_parity(CLI::App* bench, CommandContext& ctx) {
  auto o = std::make_shared<bench::ParityOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench->add_subcommand(
      "parity", "logits and gradients of one step on a device vs the CPU in float64");
  cmd->add_option("--model", o->model,
                  "an image model (32 px input) or a language model (llama-*, gpt2-*)")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--batch_size,--batch-size", o->batch_size, "images or sequences")
      ->check(CLI::Range(int64_t{1}, int64_t{256}))
      ->capture_default_str();
  cmd->add_option("--seq_len,--seq-len", o->seq_len, "tokens per sequence (language models)")
      ->check(CLI::Range(int64_t{2}, int64_t{4096}))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the weights and the batch")->capture_default_str();
  cmd->add_option("--tolerance", o->tolerance, "largest relative error that passes")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_flag("--json", *json, "print the report as JSON");
  cmd->callback([o, json, &ctx] {
    JsonStdout out(*json);
    const auto report = bench::run_parity(*o);
    if (*json)
      out.emit(report.to_json().dump(2));
    else
      std::cout << report.summary();
    if (!report.passed()) ctx.exit_code = 1;
  });
}

}  // namespace gpulab::cli
