// `gpulab export --checkpoint INDEX --output FILE`: joins a sharded checkpoint (--shard) into one
// safetensors file under the model's public (torchvision / Hugging Face) names.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/weights/safetensors.h"

namespace gpulab::cli {
namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string checkpoint;
  std::string output;
};

void run_export(const ExportOptions& o) {
  fs::path index = o.checkpoint;
  // The shard file of rank 0 names the same checkpoint as its index.
  if (index.extension() != ".json") {
    auto name = index.filename().string();
    index = index.parent_path() / (name.substr(0, name.find(".rank-")) + ".json");
  }
  if (!fs::exists(index))
    throw Exception(Code::kNotFound, "no sharded checkpoint index at " + index.string(),
                    "pass the ckpt-e*-s*.json file of a run trained with --shard");
  auto tensors = train::dist::consolidate_sharded_checkpoint(index).value_or_throw();
  if (auto st = train::write_safetensors(o.output, tensors, {{"producer", "gpulab export"}}); !st)
    throw Exception(st.error());
  std::printf("Exported %zu tensors from %s to %s\n", tensors.size(), index.c_str(),
              o.output.c_str());
}

}  // namespace

void add_export_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export", "join a sharded checkpoint (gpulab train --shard) into one safetensors file");
  cmd->add_option("--checkpoint", o->checkpoint, "the checkpoint's index (ckpt-e*-s*.json)")
      ->required();
  cmd->add_option("--output", o->output, "the safetensors file to write (atomically)")->required();
  cmd->callback([o] { run_export(*o); });
}

}  // namespace gpulab::cli
