// `gpulab data tokenize`: plain text or JSONL files -> a token data folder for language models
// (train.bin, val.bin, meta.json), once, with a progress bar (a line every few seconds when
// stdout is not a terminal).
#include <chrono>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "core/strings.h"
#include "train/data/tokenize_corpus.h"
#include "train/progress.h"

namespace gpulab::cli {

void add_data_tokenize_command(CLI::App& data) {
  struct Args {
    std::vector<std::string> inputs;
    train::TokenizeOptions opts;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = data.add_subcommand(
      "tokenize", "turn text files into a token data folder for language-model training");
  cmd->add_option("--input", a->inputs, "plain text files, or JSONL files with a \"text\" field")
      ->required();
  cmd->add_option(
         "--tokenizer", a->opts.tokenizer,
         "bytes (vocab 256), a SentencePiece .model (gpulab tokenizer train), or a Hugging "
         "Face tokenizer.json (or a model folder holding one)")
      ->capture_default_str();
  cmd->add_option("--out", a->out, "folder to write train.bin, val.bin and meta.json to")
      ->required();
  cmd->add_option("--val_fraction,--val-fraction", a->opts.val_fraction,
                  "share of text blocks held out for validation")
      ->capture_default_str();
  cmd->add_option("--block_bytes", a->opts.block_bytes,
                  "plain text is split into blocks of whole lines this long (the unit of the "
                  "split)")
      ->capture_default_str();
  cmd->add_flag("--overwrite", a->opts.overwrite, "replace token data already in --out");
  cmd->callback([a] {
    for (const auto& p : a->inputs) a->opts.inputs.emplace_back(p);
    a->opts.out_dir = a->out;
    const bool tty = train::ProgressBar::stdout_is_tty();
    std::unique_ptr<train::ProgressBar> bar;
    const auto start = std::chrono::steady_clock::now();
    auto last_line = start;
    auto rate = [start](int64_t done) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return human_bytes(s > 0 ? static_cast<double>(done) / s : 0.0) + "/s";
    };
    auto progress = [&](int64_t done, int64_t total) {
      if (tty) {
        if (!bar) bar = std::make_unique<train::ProgressBar>(true, total, "tokenize");
        bar->update(done, rate(done));
        return;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now - last_line < std::chrono::seconds(5)) return;
      last_line = now;
      std::printf(
          "tokenize: %s of %s (%.0f%%), %s\n", human_bytes(static_cast<double>(done)).c_str(),
          human_bytes(static_cast<double>(total)).c_str(),
          100.0 * static_cast<double>(done) / static_cast<double>(std::max<int64_t>(total, 1)),
          rate(done).c_str());
      std::fflush(stdout);
    };
    auto meta = train::tokenize_corpus(a->opts, progress);
    if (bar) bar->clear();
    const train::TokenMeta m = std::move(meta).value_or_throw();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("tokenizer: %s, vocab %lld, %s\n", m.tokenizer.c_str(),
                static_cast<long long>(m.vocab_size), train::token_dtype_name(m.dtype));
    std::printf("train: %lld tokens from %s of text (%.3f bytes/token)\n",
                static_cast<long long>(m.train.tokens),
                human_bytes(static_cast<double>(m.train.text_bytes)).c_str(), m.bytes_per_token());
    std::printf("val: %lld tokens from %s of text\n", static_cast<long long>(m.val.tokens),
                human_bytes(static_cast<double>(m.val.text_bytes)).c_str());
    std::printf("wrote %s in %.1f s\n", a->out.c_str(), secs);
  });
}

}  // namespace gpulab::cli
