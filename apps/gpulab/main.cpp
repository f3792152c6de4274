// gpulab entry point: builds the subcommand table, parses, and maps errors to exit codes.
#include <cstdio>
#include <exception>
#include <iostream>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/log.h"

namespace {

using gpulab::cli::RegisterFn;

// One explicit list: a subcommand exists when its component is built.
const std::vector<RegisterFn>& command_table() {
  static const std::vector<RegisterFn> table = {
    gpulab::cli::add_detect_command,
    gpulab::cli::add_launch_command,
    gpulab::cli::add_slurm_command,
#if GPULAB_WITH_TRAIN
    gpulab::cli::add_gpu_test_command,
    gpulab::cli::add_train_command,
    gpulab::cli::add_data_command,
    gpulab::cli::add_models_command,
    gpulab::cli::add_infer_command,
    gpulab::cli::add_bench_command,
#endif
#if GPULAB_WITH_BUILDER
    gpulab::cli::add_image_command,
    gpulab::cli::add_ddp_command,
#endif
#if GPULAB_WITH_SERVICE
    gpulab::cli::add_serve_command,
#endif
  };
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "gpulab: GPU discovery and lab images, a GPU container service, and distributed "
      "data-parallel training, in one binary."};
  app.name("gpulab");
  app.require_subcommand(1);
  app.set_version_flag("--version", GPULAB_VERSION);
  std::string log_level;
  app.add_option("--log-level", log_level, "debug, info, warn (default), error")
      ->envname("GPULAB_LOG");
  app.parse_complete_callback([&] { gpulab::init_logging(log_level); });

  gpulab::cli::CommandContext ctx;
  for (RegisterFn add : command_table()) add(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // usage errors share exit code 2 with other bad input
  } catch (const gpulab::Exception& e) {
    std::fflush(stdout);
    std::cerr << "error: " << e.error().message << "\n";
    if (!e.hint().empty()) std::cerr << "hint: " << e.hint() << "\n";
    return gpulab::exit_code_for(e.code());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return ctx.exit_code;
}
