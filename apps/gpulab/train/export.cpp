// `gpulab export --checkpoint PATH --output DIR|FILE.safetensors`: turns any run's weights (a
// finished or interrupted run folder, a plain or sharded checkpoint) into a Hugging Face folder
// (model.safetensors, config.json, tokenizer files) or one safetensors file.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "train/run_files.h"
#include "train/weights_export.h"

namespace gpulab::cli {
namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string checkpoint;
  std::string output;
};

std::string source_name(const train::ModelFiles& f) {
  switch (f.source) {
    case train::WeightsSource::kCheckpoint:
      return "checkpoint " + f.weights.string();
    case train::WeightsSource::kShardedCheckpoint:
      return "sharded checkpoint " + f.weights.string();
    case train::WeightsSource::kMeshCheckpoint:
      return "tensor/pipeline-parallel checkpoint " + f.weights.string();
    case train::WeightsSource::kSafetensors:
      break;
  }
  return f.weights.string();
}

// The weights alone, under the model's names (torchvision's or Hugging Face's), into `file`.
void export_weights_file(train::ModelFiles& files, const fs::path& file) {
  auto tensors = train::read_model_weights(files).value_or_throw();
  if (!file.parent_path().empty()) fs::create_directories(file.parent_path());
  if (auto st =
          train::write_safetensors(file, tensors, train::safetensors_metadata("gpulab export"));
      !st)
    throw Exception(st.error());
  std::printf("Exported %zu tensors from %s to %s\n", tensors.size(), source_name(files).c_str(),
              file.c_str());
}

void run_export(const ExportOptions& o) {
  auto files = train::locate_model_files(o.checkpoint).value_or_throw();
  const fs::path out = o.output;
  if (out.extension() == ".safetensors") return export_weights_file(files, out);
  if (fs::exists(out) && !fs::is_directory(out))
    throw Exception(Code::kInvalidArgument, out.string() + " is a file",
                    "pass a folder for a Hugging Face folder, or a name ending .safetensors");
  const bool lm = !files.config.empty() ||
                  (files.options.contains("model") && files.options["model"].is_string() &&
                   train::is_language_model(files.options["model"].get<std::string>()));
  // An image classifier: its weights under torchvision's names, in the folder.
  if (!lm) return export_weights_file(files, out / "model.safetensors");
  auto loaded = train::load_decoder(files).value_or_throw();
  train::write_hf_folder(out, loaded.config, loaded.tensors, loaded.tokenizer_spec,
                         "gpulab export");
  std::printf("Exported %zu tensors from %s to %s (model.safetensors, config.json%s)\n",
              loaded.tensors.size(), source_name(files).c_str(), out.c_str(),
              loaded.tokenizer_spec.empty() ? "" : ", tokenizer files");
}

}  // namespace

void add_export_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto o = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export",
      "turn a run's weights (a run folder, a checkpoint, plain or sharded) into a Hugging Face "
      "folder or one safetensors file");
  cmd->add_option("--checkpoint", o->checkpoint,
                  "a run folder (finished or interrupted), or a checkpoint: ckpt-*.json, "
                  "ckpt-*.pt, or a shard file")
      ->required();
  cmd->add_option("--output", o->output,
                  "a folder (gets model.safetensors, config.json and the tokenizer files of a "
                  "language model), or FILE.safetensors for the weights alone")
      ->required();
  cmd->callback([o] { run_export(*o); });
}

}  // namespace gpulab::cli
