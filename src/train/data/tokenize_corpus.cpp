// Text files -> token data folder (see tokenize_corpus.h).
#include "train/data/tokenize_corpus.h"

#include <fmt/format.h>

#include <cmath>

#include "core/disk_space.h"
#include "core/files.h"
#include "train/data/text_source.h"
#include "train/data/tokenizer.h"

namespace gpulab::train {
namespace {

// A full disk part way names the folder and what all of it needs: at most one token per byte of
// text (the writer itself only knows the bytes of one file so far).
Error whole_folder_error(Error e, const fs::path& out_dir, int64_t text_bytes, TokenDtype dtype) {
  if (e.code != Code::kResourceExhausted) return e;
  return no_space_error(
      out_dir, static_cast<uint64_t>(text_bytes) * static_cast<uint64_t>(token_width(dtype)));
}

}  // namespace

Result<TokenMeta> tokenize_corpus(const TokenizeOptions& o, const TokenizeProgress& progress) {
  if (!(o.val_fraction >= 0.0 && o.val_fraction < 1.0))
    return Error(Code::kInvalidArgument,
                 fmt::format("--val_fraction {} must be in [0, 1)", o.val_fraction));
  if (o.out_dir.empty()) return Error(Code::kInvalidArgument, "no --out folder given");
  auto reader = TextReader::open(o.inputs, o.block_bytes);
  if (!reader) return reader.error();
  auto tok = open_tokenizer(o.tokenizer);
  if (!tok) return tok.error();
  const Tokenizer& t = **tok;

  TokenMeta meta;
  meta.vocab_size = t.vocab_size();
  meta.tokenizer = t.kind();
  meta.eos_id = t.eos_id();
  for (const auto& p : o.inputs)
    meta.sources.push_back(fs::absolute(p).lexically_normal().string());
  // The files that define the tokenizer travel with the tokens (model first, by its own name;
  // a SentencePiece model is always tokenizer.model there).
  std::vector<std::pair<std::string, std::string>> model_files;
  for (const auto& f : t.files()) {
    auto m = read_file(f);
    if (!m) return m.error();
    model_files.emplace_back(f.filename().string(), std::move(*m));
  }
  if (t.kind() == "sentencepiece" && model_files.empty()) {
    auto m = read_file(o.tokenizer);
    if (!m) return m.error();
    model_files.emplace_back("tokenizer.model", std::move(*m));
  }
  if (!model_files.empty()) meta.tokenizer_model = model_files.front().first;
  auto writer = TokenWriter::create(o.out_dir, meta, o.overwrite);
  if (!writer) return writer.error();

  const int64_t stride =
      o.val_fraction > 0 ? std::max<int64_t>(1, std::llround(1.0 / o.val_fraction)) : 0;
  TextBlock block;
  for (int64_t k = 0;; ++k) {
    auto more = reader->next(block);
    if (!more) return more.error();  // the writer's destructor removes its partial files
    if (!*more) break;
    std::vector<int32_t> ids = t.encode(block.text);
    if (block.document_end && t.eos_id() >= 0) ids.push_back(static_cast<int32_t>(t.eos_id()));
    const bool val = stride > 0 && k % stride == stride - 1;
    const auto split = val ? TokenWriter::Split::kVal : TokenWriter::Split::kTrain;
    if (auto s = (*writer)->append(split, ids, static_cast<int64_t>(block.text.size())); !s)
      return whole_folder_error(s.error(), o.out_dir, reader->total_bytes(),
                                (*writer)->meta().dtype);
    if (progress) progress(reader->bytes_read(), reader->total_bytes());
  }
  const TokenMeta& m = (*writer)->meta();
  if (m.train.tokens == 0)
    return Error(Code::kInvalidArgument, "the inputs hold no text", "check the --input files");
  if (stride > 0 && m.val.tokens == 0)
    return Error(Code::kInvalidArgument,
                 fmt::format("the validation split would be empty: the inputs make fewer than {} "
                             "blocks of {} bytes",
                             stride, o.block_bytes),
                 "pass a larger --val_fraction, or more text");
  for (const auto& [name, bytes] : model_files)
    if (auto s = write_file_atomic(o.out_dir / name, bytes); !s) return s.error();
  auto done = (*writer)->finish();
  if (!done)
    return whole_folder_error(done.error(), o.out_dir, reader->total_bytes(),
                              (*writer)->meta().dtype);
  return done;
}

}  // namespace gpulab::train
