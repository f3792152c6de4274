// `gpulab generate`: loads a trained decoder (a shape name, a config.json or a run folder, plus
// safetensors weights under Hugging Face's names) and continues a prompt, printing as it goes.
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "train/data/token_file.h"
#include "train/data/tokenizer.h"
#include "train/device.h"
#include "train/generate.h"
#include "train/models/lm_families.h"
#include "train/trainer.h"
#include "train/weights/safetensors.h"

namespace gpulab::cli {
namespace {

struct GenerateArgs {
  std::string model, weights, prompt, device = "cpu", tokenizer = "bytes", data_dir;
  train::SamplingOptions sampling;
};

void run_generate(const GenerateArgs& a) {
  train::DecoderConfig cfg = train::find_decoder_config(a.model).value_or_throw();
  auto file = train::read_safetensors(a.weights).value_or_throw();
  file.tensors = train::from_hf_names(cfg, std::move(file.tensors));
  // Shapes that take their vocabulary from the data read it from the embedding table.
  const std::string embed_name(cfg.traits().token_embedding);
  const auto embed = file.tensors.find(embed_name);
  if (embed == file.tensors.end() || embed->second.dim() != 2)
    throw Exception(Code::kInvalidArgument, a.weights + " has no 2-D " + embed_name,
                    "pass the model.safetensors of `gpulab train` or a Hugging Face file of the "
                    "same family (" +
                        cfg.family + ")");
  if (cfg.vocab_from_data) cfg.vocab_size = embed->second.size(0);
  auto model = train::build_causal_lm(cfg);
  train::load_state_dict(*model, file.tensors, a.weights).value_or_throw();
  model->to(train::resolve_device(a.device, 0));
  // The tokenizer the token data was made with (--data_dir), else --tokenizer (bytes default).
  std::string spec = a.tokenizer;
  if (!a.data_dir.empty()) {
    train::TokenDataOptions o;
    o.verify = false;
    spec = train::TokenData::open(a.data_dir, o).value_or_throw().tokenizer_spec();
  }
  auto tok = train::open_tokenizer(spec).value_or_throw();
  if (tok->vocab_size() > cfg.vocab_size)
    throw Exception(Code::kInvalidArgument,
                    "the tokenizer's vocabulary (" + std::to_string(tok->vocab_size()) +
                        ") is larger than the model's (" + std::to_string(cfg.vocab_size) + ")",
                    "pass the --data_dir (or --tokenizer) the model was trained with");
  std::vector<int64_t> prompt;
  if (tok->prepends_bos()) prompt.push_back(tok->bos_id());  // as the model's tokenizer does
  for (int32_t id : tok->encode(a.prompt)) prompt.push_back(id);
  std::vector<int32_t> out;
  train::generate(*model, prompt, a.sampling,
                  [&](int64_t t) { out.push_back(static_cast<int32_t>(t)); });
  std::printf("%s%s\n", a.prompt.c_str(), tok->decode(out).value_or_throw().c_str());
}

}  // namespace

void add_generate_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto a = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "continue a prompt with a trained language model");
  cmd->add_option(
         "--model", a->model,
         "shape name (llama-tiny, gpt2-tiny, ...), a Hugging Face config.json, or a run folder "
         "holding one")
      ->required();
  cmd->add_option("--weights", a->weights,
                  "model.safetensors (Hugging Face names of the model's family)")
      ->required();
  cmd->add_option("--prompt", a->prompt, "text to continue")->required();
  cmd->add_option("--data_dir", a->data_dir,
                  "token data folder the model trained on: use its tokenizer");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "bytes, a SentencePiece .model file, or a tokenizer.json (or its folder)")
      ->capture_default_str();
  cmd->add_option("--max_new_tokens", a->sampling.max_new_tokens, "tokens to generate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", a->sampling.temperature, "sampling temperature (0: greedy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top_k", a->sampling.top_k, "sample among the k likeliest (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--seed", a->sampling.seed, "sampling seed")->capture_default_str();
  cmd->add_option("--device", a->device, "cpu, cuda or auto")->capture_default_str();
  cmd->callback([a] { run_generate(*a); });
}

}  // namespace gpulab::cli
