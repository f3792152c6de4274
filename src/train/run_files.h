// What a path given to `gpulab export`, `generate` or `infer` is (a run folder, finished or
// interrupted; a checkpoint, plain or sharded; a safetensors file; a Hugging Face folder) and
// where its weights, config.json and tokenizer are: the one place those commands find them.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/json.h"
#include "core/result.h"
#include "train/checkpoint.h"
#include "train/models/causal_lm.h"
#include "train/models/decoder_config.h"
#include "train/weights/safetensors.h"
#include "train/weights/tensor_stream.h"

namespace gpulab::train {

// kMeshCheckpoint: a tensor- or pipeline-parallel run's pieces (parallel/mesh_checkpoint.h).
enum class WeightsSource { kSafetensors, kCheckpoint, kShardedCheckpoint, kMeshCheckpoint };

struct ModelFiles {
  // A safetensors file or Hugging Face's index of several (model.safetensors.index.json), a
  // checkpoint's .pt, or a per-rank checkpoint's index.
  fs::path weights;
  WeightsSource source = WeightsSource::kSafetensors;
  std::optional<CheckpointInfo> checkpoint;
  fs::path run_dir;  // the folder the weights belong to (a run's --output_dir, or their folder)
  fs::path config;   // its config.json; empty when there is none
  // The run's options where recorded (metrics.jsonl, a checkpoint); read_model_weights fills a
  // plain checkpoint's.
  Json options = Json::object();
};

// A folder gives its model.safetensors, else its Hugging Face shards' index, else its newest
// complete checkpoint (checkpoints/). A checkpoint is its ckpt-*.pt, its .json manifest, a sharded
// index or one of its shard files; one file of Hugging Face's shards stands for all of them.
// A missing path or a folder without weights is kNotFound with a hint naming what to pass.
Result<ModelFiles> locate_model_files(const fs::path& path);

// The tensors under the model's own names (Hugging Face's for a language model): a safetensors
// file as stored, a checkpoint's model, a sharded checkpoint's shards joined. A file of the wrong
// kind (a checkpoint given where safetensors is expected) is named, with what to pass instead.
Result<StateDict> read_model_weights(ModelFiles& files);
// The same one tensor at a time: a mesh checkpoint's joined as each is taken (what `gpulab
// export` writes without holding the model); the others read whole.
Result<std::unique_ptr<TensorStream>> open_model_weights(ModelFiles& files);

// The tokenizer spec (tokenizer.h) the run trained with: the tokenizer files in its folder, else
// its token data's; empty when unknown (synthetic data, a foreign folder).
std::string run_tokenizer_spec(const ModelFiles& files);

// The decoder's config: `model` when given (a shape name, a config.json or a folder with one),
// else the files' config.json, else the run's recorded --model. Tensors are renamed from
// Hugging Face's layout (from_hf_names), and a shape that takes the data's vocabulary takes
// the embedding table's.
struct LoadedDecoder {
  DecoderConfig config;
  StateDict tensors;           // under the model's names
  std::string tokenizer_spec;  // run_tokenizer_spec's
  std::string what;            // the weights' path, for messages
};
Result<LoadedDecoder> load_decoder(const ModelFiles& files, std::string_view model = {});

// load_decoder's two steps without the tensors (`gpulab export` of a mesh checkpoint streams
// them): the config found as above, then the loaded decoder of the tensors' names and shapes
// (`layout`, under the model's names), its tensors left empty.
Result<DecoderConfig> decoder_config_of(const ModelFiles& files, std::string_view model = {});
Result<LoadedDecoder> decoder_of(const ModelFiles& files, DecoderConfig config,
                                 const StateDict& layout);

// `generate`'s --model and --weights: --weights may be a file, a checkpoint or a run folder, and
// may be left out when --model is a run folder (or checkpoint) that has them.
Result<LoadedDecoder> load_decoder(const std::string& model, const std::string& weights);

// The model of a LoadedDecoder, its tensors loaded, on `device`: what generate and bench
// generate run. Throws gpulab::Exception when the tensors do not fit the config's shapes.
CausalLmPtr build_loaded_decoder(const LoadedDecoder& d, const torch::Device& device);

}  // namespace gpulab::train
