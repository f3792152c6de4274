// `gpulab generate`: loads a trained decoder (a shape name, a config.json or a run folder, plus
// safetensors weights under Hugging Face's names) and continues a prompt, printing as it goes;
// several prompts run as one batch (train::generate_groups) and print when it ends.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "train/data/incremental_decoder.h"
#include "train/data/token_file.h"
#include "train/data/tokenizer.h"
#include "train/device.h"
#include "train/generate.h"
#include "train/rollout.h"
#include "train/run_files.h"
#include "train_flags.h"

namespace gpulab::cli {
namespace {

struct GenerateArgs {
  std::string model, weights, device = "cpu", tokenizer, data_dir;
  std::vector<std::string> prompts, stop;
  int64_t num_samples = 1;
  train::SamplingOptions sampling;
};

// --stop "\n" means a newline, as it would in Python: \n, \t and \\ are unescaped.
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const char n = i + 1 < s.size() ? s[i + 1] : '\0';
    if (s[i] == '\\' && (n == 'n' || n == 't' || n == '\\')) {
      out += n == 'n' ? '\n' : n == 't' ? '\t' : '\\';
      ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The prompt's ids as the model's tokenizer makes them (a BOS first where it prepends one, as
// Llama 3's does).
std::vector<int32_t> prompt_ids(const train::Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids;
  if (tok.prepends_bos()) ids.push_back(static_cast<int32_t>(tok.bos_id()));
  for (int32_t id : tok.encode(text)) ids.push_back(id);
  return ids;
}

std::vector<std::string> stop_strings(const GenerateArgs& a) {
  std::vector<std::string> stops;
  for (const auto& s : a.stop) stops.push_back(unescape(s));
  return stops;
}

void print_rate(int64_t tokens, double secs) {
  std::fprintf(stderr, "generated %lld tokens in %.2f s (%.1f tokens/s)\n",
               static_cast<long long>(tokens), secs,
               secs > 0 ? static_cast<double>(tokens) / secs : 0.0);
}

// Several prompts: every prompt x --num_samples rows in one batch (each prompt's prefix once,
// finished rows leaving it), printed prompt by prompt once the batch ends.
void sample_batch(train::CausalLm& model, const train::Tokenizer& tok, const GenerateArgs& a) {
  std::vector<std::vector<int64_t>> prompts;
  std::vector<std::unique_ptr<train::IncrementalDecoder>> texts;
  const auto stops = stop_strings(a);
  for (const auto& text : a.prompts) {
    const auto ids = prompt_ids(tok, text);
    prompts.emplace_back(ids.begin(), ids.end());
    for (int64_t s = 0; s < a.num_samples; ++s)
      texts.push_back(std::make_unique<train::IncrementalDecoder>(tok, ids, stops));
  }
  train::SamplingOptions opts = a.sampling;
  opts.eos_id = tok.eos_id();
  train::TokenSampler sampler(opts, opts.seed);
  const auto batch = train::generate_groups(model, prompts, a.num_samples, opts, sampler,
                                            [&](int64_t row, int64_t t) {
                                              auto& text = *texts[static_cast<size_t>(row)];
                                              text.push(static_cast<int32_t>(t));
                                              return !text.stopped();
                                            });
  for (size_t row = 0; row < texts.size(); ++row) {
    const auto p = row / static_cast<size_t>(a.num_samples);
    const auto s = row % static_cast<size_t>(a.num_samples);
    std::printf("[prompt %zu/%zu, sample %zu/%lld]\n%s", p + 1, a.prompts.size(), s + 1,
                static_cast<long long>(a.num_samples), a.prompts[p].c_str());
    auto& text = *texts[row];
    const std::string body = text.text();  // finish() adds what it returns to text()
    std::printf("%s%s\n", body.c_str(), text.finish().c_str());
  }
  std::fflush(stdout);
  print_rate(batch.generated_tokens, batch.seconds);
}

// Samples one after another (each streamed as it comes, from one generator, so the first is the
// one a single-sample run prints): the prompt, then the new text as the whole sequence decodes
// it. Tokens per second go to stderr, so stdout stays the text.
void sample_text(train::CausalLm& model, const train::Tokenizer& tok, const GenerateArgs& a) {
  const std::string& prompt_text = a.prompts.front();
  const auto ids = prompt_ids(tok, prompt_text);
  const std::vector<int64_t> prompt(ids.begin(), ids.end());
  train::SamplingOptions opts = a.sampling;
  opts.eos_id = tok.eos_id();
  train::TokenSampler sampler(opts, opts.seed);
  const auto stops = stop_strings(a);
  int64_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < a.num_samples; ++s) {
    if (a.num_samples > 1)
      std::printf("[sample %lld/%lld]\n", static_cast<long long>(s + 1),
                  static_cast<long long>(a.num_samples));
    std::printf("%s", prompt_text.c_str());
    std::fflush(stdout);
    train::IncrementalDecoder text(tok, ids, stops);
    train::generate_rows(model, prompt, 1, opts, sampler, [&](int64_t, int64_t t) {
      ++tokens;
      std::fputs(text.push(static_cast<int32_t>(t)).c_str(), stdout);
      std::fflush(stdout);
      return !text.stopped();
    });
    std::printf("%s\n", text.finish().c_str());
    std::fflush(stdout);
  }
  print_rate(tokens,
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

void run_generate(const GenerateArgs& a) {
  // --model and --weights resolved as export and infer do (a run folder, a checkpoint, a file).
  auto loaded = train::load_decoder(a.model, a.weights).value_or_throw();
  const train::DecoderConfig& cfg = loaded.config;
  auto model = train::build_loaded_decoder(loaded, train::resolve_device(a.device, 0));
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
  if (a.prompts.size() > 1)
    sample_batch(*model, *tok, a);
  else
    sample_text(*model, *tok, a);
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
  cmd->add_option("--prompt", a->prompts,
                  "text to continue; repeated, the prompts run as one batch (each continued "
                  "--num_samples times) and print when it ends")
      ->required();
  cmd->add_option("--data_dir", a->data_dir,
                  "token data folder the model trained on: use its tokenizer");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "bytes, a SentencePiece .model file, or a tokenizer.json (or its folder); "
                  "default: the run's, else bytes");
  cmd->add_option("--max_new_tokens", a->sampling.max_new_tokens, "tokens to generate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", a->sampling.temperature, "sampling temperature (0: greedy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top_k", a->sampling.top_k, "sample among the k likeliest (0: all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top_p", a->sampling.top_p,
                  "sample among the likeliest tokens whose probability reaches p (1: all)")
      ->capture_default_str();
  cmd->add_option("--repetition_penalty", a->sampling.repetition_penalty,
                  "> 1 discourages tokens already in the text (transformers' semantics; 1: off)")
      ->capture_default_str();
  cmd->add_option(
         "--num_samples", a->num_samples,
         "continuations of each prompt (one prompt: one after another; several: in their batch)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--stop", a->stop,
                  "stop a sample once its text contains this string (kept in the text; "
                  "repeatable; \\n is a newline). The tokenizer's end-of-sequence token always "
                  "stops it");
  add_shared_flag(cmd, "seed", a->sampling.seed);
  add_shared_flag(cmd, "device", a->device);
  cmd->callback([a] {
    // Settings first: a wrong flag should not wait for the weights to load.
    if (auto bad = train::check_sampler_settings(a->sampling)) throw Exception(*bad);
    run_generate(*a);
  });
}

}  // namespace gpulab::cli
