// `gpulab export --checkpoint PATH --output DIR|FILE.safetensors`: turns any run's weights (a
// finished or interrupted run folder, a plain or sharded checkpoint) into a Hugging Face folder
// (model.safetensors, config.json, tokenizer files) or one safetensors file.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "train/run_files.h"
#include "train/train_options.h"
#include "train/weights/hf_shards.h"
#include "train/weights/safetensors_writer.h"
#include "train/weights_export.h"

namespace gpulab::cli {
namespace {

namespace fs = std::filesystem;

struct ExportOptions {
  std::string checkpoint;
  std::string output;
  std::string max_shard_size = train::TrainOptions{}.max_shard_size;
  bool max_shard_size_given = false;
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

// The weights alone, under the model's names (torchvision's or Hugging Face's): into the file
// `out`, or, given `folder_shard_bytes`, into the folder `out` (model.safetensors, or Hugging
// Face's shards above that size).
void export_weights(train::ModelFiles& files, const fs::path& out,
                    std::optional<uint64_t> folder_shard_bytes) {
  auto tensors = train::open_model_weights(files).value_or_throw();
  const auto metadata = train::safetensors_metadata("gpulab export");
  fs::path written = out;
  if (folder_shard_bytes)
    written =
        train::write_hf_weights(out, *tensors, metadata, *folder_shard_bytes).value_or_throw();
  else if (auto st = train::write_stream(out, *tensors, metadata); !st)
    throw Exception(st.error());
  std::printf("Exported %zu tensors from %s to %s\n", tensors->layout().size(),
              source_name(files).c_str(), written.c_str());
}

// A language model's folder. A tensor/pipeline-parallel checkpoint is joined tensor by tensor
// as it is written (its names are the model's already), so a model larger than this host's
// memory exports; the other sources are read whole and renamed from Hugging Face's layout.
void export_decoder(train::ModelFiles& files, const fs::path& out, uint64_t max_shard_bytes) {
  std::unique_ptr<train::TensorStream> tensors;
  train::LoadedDecoder d;
  if (files.source == train::WeightsSource::kMeshCheckpoint) {
    auto config = train::decoder_config_of(files).value_or_throw();
    tensors = train::open_model_weights(files).value_or_throw();
    d = train::decoder_of(files, std::move(config), tensors->layout()).value_or_throw();
  } else {
    d = train::load_decoder(files).value_or_throw();
    tensors = std::make_unique<train::StateDictStream>(std::move(d.tensors));
  }
  const auto weights = train::write_hf_folder(out, d.config, *tensors, d.tokenizer_spec,
                                              "gpulab export", max_shard_bytes);
  std::printf("Exported %zu tensors from %s to %s (%s, config.json%s)\n", tensors->layout().size(),
              source_name(files).c_str(), out.c_str(), weights.filename().c_str(),
              d.tokenizer_spec.empty() ? "" : ", tokenizer files");
}

void run_export(const ExportOptions& o) {
  const uint64_t max_shard_bytes = train::parse_shard_size(o.max_shard_size).value_or_throw();
  const fs::path out = o.output;
  if (out.extension() == ".safetensors" && o.max_shard_size_given)
    throw Exception(Code::kInvalidArgument,
                    "--max_shard_size splits a folder's weights into files; --output " +
                        out.string() + " is one file",
                    "pass a folder as --output, or leave out --max_shard_size");
  auto files = train::locate_model_files(o.checkpoint).value_or_throw();
  if (out.extension() == ".safetensors") return export_weights(files, out, std::nullopt);
  if (fs::exists(out) && !fs::is_directory(out))
    throw Exception(Code::kInvalidArgument, out.string() + " is a file",
                    "pass a folder for a Hugging Face folder, or a name ending .safetensors");
  const bool lm = !files.config.empty() ||
                  (files.options.contains("model") && files.options["model"].is_string() &&
                   train::is_language_model(files.options["model"].get<std::string>()));
  if (!lm) return export_weights(files, out, max_shard_bytes);  // an image classifier
  export_decoder(files, out, max_shard_bytes);
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
  auto* shard = cmd->add_option("--max_shard_size", o->max_shard_size,
                                "a folder's weights larger than this go in Hugging Face's shards "
                                "(model-00001-of-0000N.safetensors) with "
                                "model.safetensors.index.json; sizes as transformers' "
                                "max_shard_size: 50GB, 500MB, 2GiB");
  shard->capture_default_str();
  cmd->callback([o, shard] {
    o->max_shard_size_given = shard->count() > 0;
    run_export(*o);
  });
}

}  // namespace gpulab::cli
