// Declares each subcommand's registration function; main.cpp lists them in one table.
#pragma once

#include <CLI/CLI.hpp>

namespace gpulab::cli {

// Shared by all subcommands: a callback that finishes without throwing but must report failure
// (a GPU test with failed iterations, say) sets exit_code.
struct CommandContext {
  int exit_code = 0;
};

using RegisterFn = void (*)(CLI::App& app, CommandContext& ctx);

// base (always built)
void add_detect_command(CLI::App& app, CommandContext& ctx);
void add_launch_command(CLI::App& app, CommandContext& ctx);
void add_slurm_command(CLI::App& app, CommandContext& ctx);

#if GPULAB_WITH_TRAIN
void add_gpu_test_command(CLI::App& app, CommandContext& ctx);
void add_train_command(CLI::App& app, CommandContext& ctx);
void add_data_command(CLI::App& app, CommandContext& ctx);
void add_models_command(CLI::App& app, CommandContext& ctx);
void add_infer_command(CLI::App& app, CommandContext& ctx);
void add_generate_command(CLI::App& app, CommandContext& ctx);
void add_bench_command(CLI::App& app, CommandContext& ctx);
void add_tokenizer_command(CLI::App& app, CommandContext& ctx);
// `gpulab data tokenize`, registered by add_data_command.
void add_data_tokenize_command(CLI::App& data);
void add_export_command(CLI::App& app, CommandContext& ctx);
void add_plan_command(CLI::App& app, CommandContext& ctx);
#endif

#if GPULAB_WITH_BUILDER
void add_image_command(CLI::App& app, CommandContext& ctx);
void add_ddp_command(CLI::App& app, CommandContext& ctx);
#endif

#if GPULAB_WITH_SERVICE
void add_serve_command(CLI::App& app, CommandContext& ctx);
#endif

}  // namespace gpulab::cli
