// The shared command-line front (cli_main.h): command tables, parsing, errors to exit codes.
#include "cli_main.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "core/crash_report.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "launch/rank_env.h"

namespace {

// "gpulab train" for a parse error inside `train`: the command whose --help lists the options.
std::string command_path(const CLI::App& app) {
  std::string path = app.get_name();
  const CLI::App* at = &app;
  for (;;) {
    auto subs = at->get_subcommands();
    if (subs.empty()) return path;
    at = subs.front();
    path += " " + at->get_name();
  }
}

// "did you mean --num_epochs? " for the first --flag on the command line that neither the
// command nor its parents know ("--epochs"); "" when there is none or no near name.
std::string flag_suggestion(const CLI::App& app, int argc, char** argv) {
  std::vector<const CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty())
    chain.push_back(chain.back()->get_subcommands().front());
  std::vector<std::string> known;
  for (const CLI::App* a : chain)
    for (const CLI::Option* opt : a->get_options())
      for (const std::string& n : opt->get_lnames()) known.push_back(n);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0 || arg.size() < 3) continue;
    const auto eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    bool found = false;
    for (const CLI::App* a : chain) found |= a->get_option_no_throw("--" + name) != nullptr;
    if (found) continue;
    for (char& c : name) c = c == '-' ? '_' : c;
    const std::string near = gpulab::closest_name(name, known, 2);
    return near.empty() ? "" : "did you mean --" + near + "? ";
  }
  return "";
}

}  // namespace

namespace gpulab::cli {

// One explicit list: a subcommand exists when its component is built.
const std::vector<RegisterFn>& base_commands() {
  static const std::vector<RegisterFn> table = {
    add_detect_command,
    add_launch_command,
    add_slurm_command,
#if GPULAB_WITH_BUILDER
    add_image_command,
    add_ddp_command,
#endif
#if GPULAB_WITH_SERVICE
    add_serve_command,
#endif
  };
  return table;
}

int run_cli(int argc, char** argv, const std::vector<RegisterFn>& table,
            const std::string& version) {
  install_crash_report();
  CLI::App app{
      "gpulab: GPU discovery and lab images, a GPU container service, and distributed "
      "data-parallel training, in one binary."};
  app.name("gpulab");
  app.require_subcommand(1);
  app.set_version_flag("--version", version);
  std::string log_level;
  app.add_option("--log_level,--log-level", log_level, "debug, info, warn (default), error")
      ->envname("GPULAB_LOG");
  app.parse_complete_callback([&] { gpulab::init_logging(log_level); });

  CommandContext ctx;
  for (RegisterFn add : table) add(app, ctx);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Usage errors have the shape and the exit code of every other bad input.
    std::fflush(stdout);
    std::cerr << "error: " << e.what() << "\n";
    std::cerr << "hint: " << flag_suggestion(app, argc, argv) << "`" << command_path(app)
              << " --help` lists the options\n";
    return 2;
  } catch (const gpulab::Exception& e) {
    std::fflush(stdout);
    std::string text = "error: " + e.error().message;
    if (!e.hint().empty()) text += "\nhint: " + e.hint();
    const int code = gpulab::exit_code_for(e.code());
    // A rank of `gpulab ... --nproc_per_node N` with bad input that every rank shares: the
    // launcher prints it once, instead of every rank and the launcher each saying it.
    const char* error_file = std::getenv(gpulab::launch::kEnvErrorFile);
    if (code == 2 && error_file != nullptr && *error_file != '\0') {
      gpulab::launch::report_rank_error(text);
      return code;
    }
    std::cerr << text << "\n";
    return code;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return ctx.exit_code;
}

}  // namespace gpulab::cli
