// Hugging Face tokenizer.json byte-level BPE as a gpulab Tokenizer: added tokens split out of the
// raw text, NFC where the file asks, added tokens of the normalized text, the pre-tokenizer, then
// BPE merges per piece; decoding concatenates each id's bytes.
#include <fmt/format.h>

#include <deque>

#include "core/files.h"
#include "train/data/hf_byte_map.h"
#include "train/data/hf_normalizer.h"
#include "train/data/hf_tokenizer_json.h"
#include "train/data/tokenizer.h"

namespace gpulab::train {

Result<std::unique_ptr<Tokenizer>> open_hf_tokenizer(const fs::path& path);

namespace {

class HfBpeTokenizer : public Tokenizer {
 public:
  HfBpeTokenizer(hf::TokenizerParts parts, std::vector<fs::path> files)
      : p_(std::move(parts)), files_(std::move(files)) {
    std::vector<hf::AddedToken> raw, normalized;
    id_end_ = p_.bpe.id_end();
    for (const auto& t : p_.added) {
      (t.normalized ? normalized : raw).push_back(t);
      id_end_ = std::max(id_end_, t.id + 1);
      added_bytes_[t.id] = t.content;
    }
    raw_ = hf::AddedTokenSplitter(std::move(raw));
    normalized_ = hf::AddedTokenSplitter(std::move(normalized));
    bos_ = id_of(p_.bos);
    eos_ = id_of(p_.eos);
    for (const char* name : {"<|end_of_text|>", "<|endoftext|>", "</s>"})
      if (eos_ < 0 && p_.eos.empty()) eos_ = id_of(name);
  }

  std::string kind() const override { return "hf-bpe"; }
  int64_t vocab_size() const override { return id_end_; }
  int64_t eos_id() const override { return eos_; }
  int64_t bos_id() const override { return bos_; }
  bool prepends_bos() const override { return p_.prepend_bos && bos_ >= 0; }
  std::vector<fs::path> files() const override { return files_; }

  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3);
    std::deque<std::string> storage;  // normalized and prefixed text the views below point into
    hf::PieceCache cache;
    std::vector<std::string_view> pieces;
    for (const auto& seg : raw_.split(text)) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
        continue;
      }
      std::string_view norm = seg.text;
      if (std::string out; p_.nfc && hf::to_nfc(seg.text, out))
        norm = storage.emplace_back(std::move(out));
      for (const auto& s : normalized_.split(norm)) {
        if (s.id >= 0) {
          ids.push_back(s.id);
          continue;
        }
        pieces.clear();
        p_.pre.pieces(s.text, storage, pieces);
        for (std::string_view piece : pieces) p_.bpe.encode_piece(piece, ids, cache);
      }
    }
    return ids;
  }

  Result<std::string> decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (const auto a = added_bytes_.find(id); a != added_bytes_.end()) {
        out += a->second;
        continue;
      }
      const std::string& b = p_.bpe.bytes_of(id);
      if (b.empty())
        return Error(Code::kInvalidArgument,
                     fmt::format("token id {} is not in the tokenizer.json vocabulary", id));
      out += b;
    }
    return out;
  }

 private:
  int64_t id_of(const std::string& content) const {
    if (content.empty()) return -1;
    for (const auto& t : p_.added)
      if (t.content == content) return t.id;
    return p_.bpe.id_of(hf::spell_bytes(content));
  }

  hf::TokenizerParts p_;
  std::vector<fs::path> files_;
  hf::AddedTokenSplitter raw_, normalized_;
  std::unordered_map<int32_t, std::string> added_bytes_;
  int32_t id_end_ = 0;
  int64_t bos_ = -1, eos_ = -1;
};

Result<Json> read_json(const fs::path& p) {
  auto text = read_file(p);
  if (!text) return text.error();
  return parse_json(*text, p.string());
}

}  // namespace

// path: a tokenizer.json, or a folder holding one (a Hugging Face model folder).
Result<std::unique_ptr<Tokenizer>> open_hf_tokenizer(const fs::path& path) {
  std::error_code ec;
  const fs::path file = fs::is_directory(path, ec) ? path / "tokenizer.json" : path;
  if (!fs::exists(file, ec))
    return Error(Code::kNotFound, file.string() + " does not exist",
                 "pass a tokenizer.json, a folder holding one, a SentencePiece .model or bytes");
  auto tok = read_json(file);
  if (!tok) return tok.error();
  std::vector<fs::path> files{file};
  Json config;  // bos_token and eos_token, where the model's folder has them
  const fs::path config_path = file.parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    auto c = read_json(config_path);
    if (!c) return c.error();
    config = std::move(*c);
    files.push_back(config_path);
  }
  auto parts = hf::parse_tokenizer_json(*tok, config);
  if (!parts)
    return Error(parts.error().code, file.string() + ": " + parts.error().message,
                 parts.error().hint);
  return std::unique_ptr<Tokenizer>(
      std::make_unique<HfBpeTokenizer>(std::move(*parts), std::move(files)));
}

}  // namespace gpulab::train
