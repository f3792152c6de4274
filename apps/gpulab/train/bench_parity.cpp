// `gpulab bench parity`: one forward and backward pass on a device against the CPU in float64
// (bench::run_parity), for checking a GPU host's numerics before trusting its speed.
#include <iostream>
#include <memory>

#include "bench/device_parity.h"
#include "commands.h"
#include "core/flag_checks.h"
#include "json_stdout.h"
#include "train_flags.h"
#include "usage.h"

namespace gpulab::cli {

void add_bench_parity(CLI::App* bench, CommandContext& ctx) {
  auto o = std::make_shared<bench::ParityOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench->add_subcommand(
      "parity",
      "logits and gradients of one step on a device vs the CPU in float64: an image model (32 px "
      "input) or a language model (llama-*, gpt2-*), --batch_size 1..256, --seq_len 2..4096");
  add_shared_flag(cmd, "model", o->model);
  add_shared_flag(cmd, "device", o->device);
  add_shared_flag(cmd, "batch_size", o->batch_size);
  cmd->add_option("--seq_len,--seq-len", o->seq_len, "tokens per sequence (language models)")
      ->capture_default_str();
  add_shared_flag(cmd, "seed", o->seed);
  cmd->add_option("--tolerance", o->tolerance, "largest relative error that passes")
      ->capture_default_str();
  cmd->add_flag("--json", *json, "print the report as JSON");
  cmd->callback([cmd, o, json, &ctx] {
    // The ranges a one-step check needs, refused the way every training flag is.
    for (const Status& st : {flag_within("batch_size", o->batch_size, FlagRange{1, 256}),
                             flag_within("seq_len", o->seq_len, FlagRange{2, 4096}),
                             flag_within("tolerance", o->tolerance, FlagRange{0, 1})})
      throw_usage_error(st, cmd);
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
