// Finding a run's weights, config.json and tokenizer from whatever path a user passes.
#include "train/run_files.h"

#include <fstream>

#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"
#include "train/data/token_file.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/models/lm_families.h"
#include "train/parallel/mesh_checkpoint.h"
#include "train/weights/hf_shards.h"

namespace gpulab::train {
namespace {

constexpr const char* kWhatToPass =
    "pass a run folder (the --output_dir of `gpulab train`), one of its checkpoints "
    "(checkpoints/ckpt-*.json or .pt), a model.safetensors, or a Hugging Face folder";

// The folder a checkpoint belongs to: the run folder above checkpoints/.
fs::path run_dir_of_checkpoint(const fs::path& manifest) {
  const fs::path dir = manifest.parent_path();
  return dir.filename() == "checkpoints" ? dir.parent_path() : dir;
}

// The options of the run's first metrics.jsonl line ({"type": "run", "options": ...}).
Json options_from_metrics(const fs::path& run_dir) {
  std::ifstream in(run_dir / "metrics.jsonl");
  std::string line;
  if (!in || !std::getline(in, line)) return Json::object();
  auto j = parse_json(line, "metrics.jsonl");
  if (!j || !j->is_object() || !j->contains("options") || !(*j)["options"].is_object())
    return Json::object();
  return (*j)["options"];
}

Result<ModelFiles> from_checkpoint(const fs::path& manifest) {
  ModelFiles f;
  auto info = checkpoint_at(manifest);  // checks that the manifest parses
  if (!info)
    return Error{Code::kInvalidArgument,
                 manifest.string() + " is not a checkpoint manifest (no \"file\" and \"checksum\")",
                 kWhatToPass};
  f.checkpoint = *info;
  f.run_dir = run_dir_of_checkpoint(manifest);
  const bool mesh = parallel::is_mesh_checkpoint(*info);
  if (mesh || dist::is_sharded_checkpoint(*info)) {
    f.source = mesh ? WeightsSource::kMeshCheckpoint : WeightsSource::kShardedCheckpoint;
    f.weights = manifest;
    auto index = parse_json(read_file(manifest).value_or(""), manifest.string());
    if (index && index->is_object()) f.options = index->value("options", Json::object());
  } else {
    f.source = WeightsSource::kCheckpoint;
    f.weights = info->file;
  }
  return f;
}

Result<ModelFiles> from_folder(const fs::path& dir) {
  // model.safetensors, else Hugging Face's sharded weights: the order transformers looks in.
  if (const fs::path w = hf_weights_path(dir); fs::exists(w)) {
    ModelFiles f;
    f.weights = w;
    f.run_dir = dir;
    return f;
  }
  for (const fs::path& ckpts : {dir / "checkpoints", dir}) {
    if (auto c = find_resumable(ckpts)) return from_checkpoint(c->manifest);
  }
  return Error{
      Code::kNotFound,
      dir.string() +
          " has no model.safetensors, no model.safetensors.index.json and no complete checkpoint",
      "a run stopped before its first checkpoint has no weights; " + std::string(kWhatToPass)};
}

Result<ModelFiles> locate(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return Error{Code::kNotFound, "no such file or folder: " + path.string(), kWhatToPass};
  if (fs::is_directory(path, ec)) return from_folder(path);
  const std::string name = path.filename().string();
  if (path.extension() == ".json" && name != "config.json" && !is_hf_index(path))
    return from_checkpoint(path);
  if (path.extension() == ".pt") {
    // A shard file (ckpt-….rank-R-of-W.pt) names the checkpoint of its index.
    const auto rank = name.find(".rank-");
    if (rank != std::string::npos)
      return from_checkpoint(path.parent_path() / (name.substr(0, rank) + ".json"));
    const fs::path manifest = fs::path(path).replace_extension(".json");
    if (!fs::exists(manifest, ec))
      return Error{Code::kDataError,
                   path.string() + " has no manifest " + manifest.filename().string() +
                       " beside it (a checkpoint counts only with its manifest)",
                   "copy the .json with it, or pass the run folder"};
    return from_checkpoint(manifest);
  }
  if (name == "config.json") return from_folder(path.parent_path());
  // A mesh checkpoint's piece (ckpt-….mesh-R-of-N.safetensors) names the checkpoint of its index.
  if (const auto piece = name.find(".mesh-");
      piece != std::string::npos && name.rfind("ckpt-", 0) == 0)
    return from_checkpoint(path.parent_path() / (name.substr(0, piece) + ".json"));
  ModelFiles f;  // anything else is read as safetensors, and named if it is not
  // One file of Hugging Face's shards stands for the whole set its index lists.
  f.weights = hf_index_of_shard(path).value_or(path);
  f.run_dir = path.parent_path();
  return f;
}

// A safetensors read that says what the file is when it is not one.
Result<StateDict> read_weights_file(const fs::path& path) {
  if (is_hf_index(path)) return read_hf_shards(path);
  auto file = read_safetensors(path);
  if (file) return std::move(file->tensors);
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  if (in && std::string_view(magic, 4) == std::string_view("PK\x03\x04", 4))
    return Error{Code::kInvalidArgument,
                 path.string() + " is a PyTorch archive (a checkpoint), not a safetensors file",
                 "pass the run folder or the checkpoint's ckpt-*.json beside its .pt; `gpulab "
                 "export --checkpoint RUN_DIR --output DIR` writes model.safetensors"};
  return file.error();  // a damaged safetensors file: its own one-line message says what is wrong
}

// The tokenizer of the token data a run trained on (its recorded --dataset text --data_dir).
std::string tokenizer_spec_of_options(const Json& options) {
  if (!options.is_object() || options.value("dataset", std::string{}) != "text") return "";
  TokenDataOptions o;
  o.verify = false;
  auto data = TokenData::open(options.value("data_dir", std::string{}), o);
  return data ? data->tokenizer_spec() : "";
}

}  // namespace

Result<ModelFiles> locate_model_files(const fs::path& path) {
  auto f = locate(path);
  if (!f) return f;
  std::error_code ec;
  for (const fs::path& dir : {f->run_dir, f->weights.parent_path()})
    if (f->config.empty() && fs::is_regular_file(dir / "config.json", ec))
      f->config = dir / "config.json";
  if (f->options.empty()) f->options = options_from_metrics(f->run_dir);
  return f;
}

Result<StateDict> read_model_weights(ModelFiles& files) {
  switch (files.source) {
    case WeightsSource::kSafetensors:
      return read_weights_file(files.weights);
    case WeightsSource::kShardedCheckpoint:
      return dist::consolidate_sharded_checkpoint(files.weights);
    case WeightsSource::kMeshCheckpoint:
      return parallel::consolidate_mesh_checkpoint(files.weights);
    case WeightsSource::kCheckpoint: {
      auto w = read_checkpoint_weights(*files.checkpoint);
      if (!w) return w.error();
      if (!w->options.empty()) files.options = w->options;
      return std::move(w->tensors);
    }
  }
  return Error{Code::kInternal, "unknown weights source"};
}

Result<std::unique_ptr<TensorStream>> open_model_weights(ModelFiles& files) {
  if (files.source == WeightsSource::kMeshCheckpoint)
    return parallel::mesh_checkpoint_stream(files.weights);
  auto tensors = read_model_weights(files);
  if (!tensors) return tensors.error();
  return std::unique_ptr<TensorStream>(std::make_unique<StateDictStream>(std::move(*tensors)));
}

std::string run_tokenizer_spec(const ModelFiles& files) {
  std::error_code ec;
  if (fs::is_regular_file(files.run_dir / "tokenizer.model", ec))
    return (files.run_dir / "tokenizer.model").string();
  if (auto cfg = read_file(files.run_dir / "tokenizer_config.json")) {
    auto j = parse_json(*cfg, "tokenizer_config.json");
    if (j && j->is_object() && j->value("gpulab_tokenizer", std::string{}) == "bytes")
      return "bytes";
  }
  // A Hugging Face tokenizer.json the run was tokenized with (a bytes run's is marked above).
  if (fs::is_regular_file(files.run_dir / "tokenizer.json", ec)) return files.run_dir.string();
  return tokenizer_spec_of_options(files.options);
}

Result<DecoderConfig> decoder_config_of(const ModelFiles& files, std::string_view model) {
  std::error_code ec;
  Result<DecoderConfig> cfg = Error{Code::kInvalidArgument, ""};
  if (!model.empty()) cfg = find_decoder_config(model);
  // A run folder given as --model that has no config.json (a run stopped early): its record.
  if (!model.empty() && !cfg && !fs::is_directory(fs::path(model), ec)) return cfg.error();
  if (!cfg && !files.config.empty()) cfg = find_decoder_config(files.config.string());
  if (!cfg && files.options.contains("model") && files.options["model"].is_string())
    cfg = find_decoder_config(files.options["model"].get<std::string>());
  if (!cfg)
    return Error{
        Code::kInvalidArgument,
        "no config.json beside " + files.weights.string() + " and no record of its --model",
        "pass --model with the shape name (see `gpulab models`) or the config.json"};
  return cfg;
}

Result<LoadedDecoder> decoder_of(const ModelFiles& files, DecoderConfig config,
                                 const StateDict& layout) {
  LoadedDecoder out{std::move(config), {}, run_tokenizer_spec(files), files.weights.string()};
  // Shapes that take their vocabulary from the data read it from the embedding table.
  const std::string embed_name(out.config.traits().token_embedding);
  const auto embed = layout.find(embed_name);
  if (embed == layout.end() || embed->second.dim() != 2)
    return Error{Code::kInvalidArgument, out.what + " has no 2-D " + embed_name,
                 "pass the weights of a `gpulab train` run or a Hugging Face file of the same "
                 "family (" +
                     out.config.family + ")"};
  if (out.config.vocab_from_data) out.config.vocab_size = embed->second.size(0);
  return out;
}

Result<LoadedDecoder> load_decoder(const ModelFiles& files, std::string_view model) {
  auto cfg = decoder_config_of(files, model);
  if (!cfg) return cfg.error();
  ModelFiles f = files;
  auto tensors = read_model_weights(f);
  if (!tensors) return tensors.error();
  StateDict renamed = from_hf_names(*cfg, std::move(*tensors));
  auto out = decoder_of(f, std::move(*cfg), renamed);
  if (out) out->tensors = std::move(renamed);
  return out;
}

Result<LoadedDecoder> load_decoder(const std::string& model, const std::string& weights) {
  std::error_code ec;
  const bool model_has_files = fs::is_directory(model, ec) || fs::path(model).extension() == ".pt";
  if (weights.empty() && !model_has_files)
    return Error{Code::kInvalidArgument, "--weights is needed with --model " + model,
                 "pass --weights (a model.safetensors, a run folder or a checkpoint), or a run "
                 "folder as --model"};
  auto files = locate_model_files(weights.empty() ? model : weights);
  if (!files) return files.error();
  // A checkpoint as --model carries no config of its own: its run's.
  const bool model_is_file = fs::path(model).extension() == ".pt";
  return load_decoder(*files, model_is_file ? std::string_view{} : std::string_view(model));
}

CausalLmPtr build_loaded_decoder(const LoadedDecoder& d, const torch::Device& device) {
  auto model = build_causal_lm(d.config);
  load_state_dict(*model, d.tensors, d.what).value_or_throw();
  model->to(device);
  return model;
}

}  // namespace gpulab::train
