// Entry point of gpulab-torch, gpulab's libtorch half: every command, the training ones too.
// gpulab runs it for the commands it does not have itself (dispatch.h), so that a command without
// libtorch (serve, launch, image, detect) starts without loading it.
#include <string>
#include <vector>

#include "cli_main.h"
#include "train/build_info.h"

namespace gpulab::cli {
namespace {

const std::vector<RegisterFn>& every_command() {
  static const std::vector<RegisterFn> table = [] {
    std::vector<RegisterFn> t = {
        add_gpu_test_command, add_train_command,    add_data_command,  add_models_command,
        add_infer_command,    add_generate_command, add_bench_command, add_tokenizer_command,
        add_export_command,   add_plan_command,
    };
    const auto& base = base_commands();
    t.insert(t.begin(), base.begin(), base.end());
    return t;
  }();
  return table;
}

}  // namespace
}  // namespace gpulab::cli

int main(int argc, char** argv) {
  const std::string version =
      "gpulab " GPULAB_VERSION " (" + gpulab::train::libtorch_description() + ")";
  return gpulab::cli::run_cli(argc, argv, gpulab::cli::every_command(), version);
}
