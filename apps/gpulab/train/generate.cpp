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
#include "train/run_files.h"
#include "train/trainer.h"
#include "train/weights/safetensors.h"

namespace gpulab::cli {
namespace {

struct GenerateArgs {
  std::string model, weights, prompt, device = "cpu", tokenizer, data_dir;
  train::SamplingOptions sampling;
};

void run_generate(const GenerateArgs& a) {
  // --model and --weights resolved as export and infer do (a run folder, a checkpoint, a file).
  auto loaded = train::load_decoder(a.model, a.weights).value_or_throw();
  train::DecoderConfig cfg = loaded.config;
  auto model = train::build_causal_lm(cfg);
  train::load_state_dict(*model, loaded.tensors, loaded.what).value_or_throw();
  model->to(train::resolve_device(a.device, 0));
  // The tokenizer the token data was made with (--data_dir), else --tokenizer, else the run's.
  std::string spec = !a.tokenizer.empty()             ? a.tokenizer
                     : !loaded.tokenizer_spec.empty() ? loaded.tokenizer_spec
                                                      : "bytes";
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
                  "model.safetensors (Hugging Face names), a run folder or a checkpoint "
                  "(default: --model's run folder)");
  cmd->add_option("--prompt", a->prompt, "text to continue")->required();
  cmd->add_option("--data_dir", a->data_dir,
                  "token data folder the model trained on: use its tokenizer");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "bytes, or a SentencePiece .model file (default: the run's, else bytes)");
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
