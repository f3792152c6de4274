// `gpulab tokenizer`: train a SentencePiece model (BPE, unigram, char or word) on text files, and
// encode or decode text with any tokenizer spec (bytes, a .model file, a tokenizer.json or its
// folder).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"
#include "train/data/tokenizer.h"

namespace gpulab::cli {

namespace {

void add_train(CLI::App& parent) {
  struct Args {
    std::vector<std::string> inputs;
    train::TokenizerTrainOptions opts;
    std::string out;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = parent.add_subcommand("train", "train a SentencePiece tokenizer on text files");
  cmd->add_option("--input", a->inputs, "plain text files, or JSONL files with a \"text\" field")
      ->required();
  cmd->add_option("--vocab_size,--vocab-size", a->opts.vocab_size, "vocabulary size")
      ->capture_default_str();
  cmd->add_option("--model_type,--model-type", a->opts.model_type, "bpe, unigram, char or word")
      ->capture_default_str();
  cmd->add_option("--character_coverage,--character-coverage", a->opts.character_coverage,
                  "share of the text's characters that get pieces of their own, 0.98 to 1 "
                  "(0.9995 suits Chinese or Japanese; the rest become bytes or <unk>)")
      ->capture_default_str();
  cmd->add_option("--byte_fallback,--byte-fallback", a->opts.byte_fallback,
                  "true: characters outside the vocabulary become their UTF-8 bytes (256 ids); "
                  "false: <unk>")
      ->capture_default_str();
  cmd->add_option("--user_defined_symbols,--user-defined-symbols", a->opts.user_defined_symbols,
                  "strings that are always one piece (e.g. <|im_end|>), comma-separated")
      ->delimiter(',');
  cmd->add_option("--out", a->out, "folder to write tokenizer.model and tokenizer.vocab to")
      ->required();
  cmd->add_option("--max_sentences", a->opts.max_sentences, "lines sampled for training (0: all)")
      ->capture_default_str();
  cmd->add_option("--threads", a->opts.threads, "trainer threads (0: all cores)");
  cmd->callback([a] {
    for (const auto& p : a->inputs) a->opts.inputs.emplace_back(p);
    a->opts.out_dir = a->out;
    auto path = train::train_sentencepiece(a->opts).value_or_throw();
    auto tok = train::open_tokenizer(path.string()).value_or_throw();
    std::printf("trained %s tokenizer: vocab %lld -> %s\n", a->opts.model_type.c_str(),
                static_cast<long long>(tok->vocab_size()), path.c_str());
  });
}

// The text to encode: --text, else the --input file, else standard input.
std::string read_text(const std::string& text, const std::string& input) {
  if (!text.empty()) return text;
  if (!input.empty()) return read_file(input).value_or_throw();
  return {std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
}

void add_encode(CLI::App& parent) {
  struct Args {
    std::string tokenizer = "bytes", text, input;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = parent.add_subcommand("encode", "print the token ids of a text");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "bytes, a SentencePiece .model, or a tokenizer.json (or its folder)")
      ->capture_default_str();
  cmd->add_option("--text", a->text, "the text (default: --input or standard input)");
  cmd->add_option("--input", a->input, "a file to encode");
  cmd->callback([a] {
    auto tok = train::open_tokenizer(a->tokenizer).value_or_throw();
    const auto ids = tok->encode(read_text(a->text, a->input));
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  });
}

void add_decode(CLI::App& parent) {
  struct Args {
    std::string tokenizer = "bytes";
    std::vector<int64_t> ids;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = parent.add_subcommand("decode", "print the text of token ids");
  cmd->add_option("--tokenizer", a->tokenizer,
                  "bytes, a SentencePiece .model, or a tokenizer.json (or its folder)")
      ->capture_default_str();
  cmd->add_option("ids", a->ids, "token ids")->required();
  cmd->callback([a] {
    auto tok = train::open_tokenizer(a->tokenizer).value_or_throw();
    std::vector<int32_t> ids;
    for (int64_t id : a->ids) {
      if (id < 0 || id >= tok->vocab_size())
        throw Exception(Code::kInvalidArgument, "token id " + std::to_string(id) +
                                                    " is outside the vocabulary (0.." +
                                                    std::to_string(tok->vocab_size() - 1) + ")");
      ids.push_back(static_cast<int32_t>(id));
    }
    std::printf("%s\n", tok->decode(ids).value_or_throw().c_str());
  });
}

}  // namespace

void add_tokenizer_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* cmd = app.add_subcommand("tokenizer", "language-model tokenizers: train, encode, decode");
  cmd->require_subcommand(1);
  add_train(*cmd);
  add_encode(*cmd);
  add_decode(*cmd);
}

}  // namespace gpulab::cli
