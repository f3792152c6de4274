// SentencePiece tokenizer and trainer (Debian's libsentencepiece). Without it
// (GPULAB_HAVE_SENTENCEPIECE unset) both entry points say so and name the bytes mode.
#include <fmt/format.h>

#include <filesystem>
#include <thread>

#include "core/files.h"
#include "train/data/text_source.h"
#include "train/data/tokenizer.h"

#if GPULAB_HAVE_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#endif

namespace gpulab::train {

Result<std::unique_ptr<Tokenizer>> open_sentencepiece(const fs::path& model);

#if GPULAB_HAVE_SENTENCEPIECE

namespace {

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : sp_(std::move(sp)) {}
  std::string kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return sp_->GetPieceSize(); }
  int64_t eos_id() const override { return sp_->eos_id(); }
  int64_t bos_id() const override { return sp_->bos_id(); }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    // Encoding only fails on an unloaded model, which open_sentencepiece rules out.
    const auto st = sp_->Encode(text, &ids);
    GPULAB_ASSERT(st.ok(), "SentencePiece encode failed on a loaded model");
    return {ids.begin(), ids.end()};
  }
  Result<std::string> decode(const std::vector<int32_t>& ids) const override {
    const int n = sp_->GetPieceSize();
    for (int32_t id : ids)
      if (id < 0 || id >= n)
        return Error(
            Code::kInvalidArgument,
            fmt::format("token id {} is outside the tokenizer's vocabulary (0..{})", id, n - 1));
    std::string out;
    const auto st = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &out);
    if (!st.ok())
      return Error(Code::kInternal, std::string("SentencePiece decode: ") + st.message());
    return out;
  }

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

// Feeds SentencePiece's trainer one line at a time from plain text or JSONL inputs.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(TextReader reader) : reader_(std::move(reader)) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (lines_.empty()) {
      auto more = reader_.next(block_);
      if (!more) {
        status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kDataLoss,
                                              more.error().message);
        done_ = true;
        return;
      }
      if (!*more) {
        done_ = true;
        return;
      }
      size_t start = 0;
      while (start < block_.text.size()) {
        size_t end = block_.text.find('\n', start);
        if (end == std::string::npos) end = block_.text.size();
        if (end > start) lines_.push_back(block_.text.substr(start, end - start));
        start = end + 1;
      }
      std::reverse(lines_.begin(), lines_.end());
    }
    value_ = std::move(lines_.back());
    lines_.pop_back();
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }

 private:
  TextReader reader_;
  TextBlock block_;
  std::vector<std::string> lines_;
  std::string value_;
  bool done_ = false;
  sentencepiece::util::Status status_;
};

}  // namespace

bool sentencepiece_available() {
  return true;
}

Result<std::unique_ptr<Tokenizer>> open_sentencepiece(const fs::path& model) {
  std::error_code ec;
  if (!fs::is_regular_file(model, ec))
    return Error(Code::kNotFound, "no tokenizer model at " + model.string(),
                 "pass --tokenizer bytes, or train one: gpulab tokenizer train --input FILES "
                 "--vocab_size N --out DIR");
  auto bytes = read_file(model);
  if (!bytes) return bytes.error();
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto st = sp->LoadFromSerializedProto(*bytes);
  if (!st.ok())
    return Error(Code::kDataError,
                 fmt::format("{} is not a SentencePiece model: {}", model.string(), st.message()),
                 "train one with: gpulab tokenizer train --input FILES --vocab_size N --out DIR");
  return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(std::move(sp)));
}

Result<fs::path> train_sentencepiece(const TokenizerTrainOptions& o) {
  if (o.vocab_size < 260 || o.vocab_size > (int64_t{1} << 24))
    return Error(Code::kInvalidArgument,
                 fmt::format("--vocab_size {} is out of range (260 .. 16777216: byte fallback "
                             "needs 256 ids plus the special ones)",
                             o.vocab_size));
  if (o.model_type != "bpe" && o.model_type != "unigram")
    return Error(Code::kInvalidArgument, "--model_type must be bpe or unigram");
  auto reader = TextReader::open(o.inputs);
  if (!reader) return reader.error();
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::unordered_map<std::string, std::string> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"split_digits", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(threads)},
      {"max_sentence_length", "16384"},
      {"minloglevel", "1"},
      // SentencePiece strips and collapses whitespace by default; a language model should see
      // the text as it is (indentation, blank lines) and decode it back unchanged.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
  };
  if (o.max_sentences > 0) {
    args["input_sentence_size"] = std::to_string(o.max_sentences);
    args["shuffle_input_sentence"] = "true";
  }
  LineIterator lines(std::move(*reader));
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(args, &lines, &proto);
  if (!lines.status().ok()) return Error(Code::kDataError, std::string(lines.status().message()));
  if (!st.ok())
    return Error(Code::kInvalidArgument,
                 std::string("SentencePiece could not train: ") + st.message(),
                 "a smaller --vocab_size fits a small corpus");
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec)
    return Error(Code::kInvalidArgument,
                 fmt::format("cannot create {}: {}", o.out_dir.string(), ec.message()));
  // The vocabulary as text (id order, piece and score), for people and other tools.
  sentencepiece::SentencePieceProcessor sp;
  if (const auto ls = sp.LoadFromSerializedProto(proto); !ls.ok())
    return Error(Code::kInternal,
                 std::string("SentencePiece made an unreadable model: ") + ls.message());
  std::string vocab;
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    vocab += fmt::format("{}\t{}\n", sp.IdToPiece(i), sp.GetScore(i));
  const auto path = o.out_dir / "tokenizer.model";
  if (auto s = write_file_atomic(o.out_dir / "tokenizer.vocab", vocab); !s) return s.error();
  if (auto s = write_file_atomic(path, proto); !s) return s.error();
  return path;
}

#else  // no SentencePiece in this build

bool sentencepiece_available() {
  return false;
}

namespace {
Error unavailable() {
  return Error(Code::kUnsupported, "this gpulab was built without SentencePiece",
               "use --tokenizer bytes, or install libsentencepiece-dev and rebuild");
}
}  // namespace

Result<std::unique_ptr<Tokenizer>> open_sentencepiece(const fs::path& /*model*/) {
  return unavailable();
}

Result<fs::path> train_sentencepiece(const TokenizerTrainOptions& /*opts*/) {
  return unavailable();
}

#endif

}  // namespace gpulab::train
