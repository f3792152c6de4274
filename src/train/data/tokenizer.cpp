// The byte tokenizer and the factory that picks a tokenizer from its spec (see tokenizer.h).
#include "train/data/tokenizer.h"

#include <fmt/format.h>

namespace gpulab::train {

// Defined in tokenizer_sentencepiece.cpp (which compiles to stubs without SentencePiece).
Result<std::unique_ptr<Tokenizer>> open_sentencepiece(const std::filesystem::path& model);
// Defined in tokenizer_hf.cpp.
Result<std::unique_ptr<Tokenizer>> open_hf_tokenizer(const std::filesystem::path& path);

namespace {

// Every UTF-8 byte is its own id: vocab 256, no special ids, decode(encode(s)) == s for any s.
class ByteTokenizer : public Tokenizer {
 public:
  std::string kind() const override { return "bytes"; }
  int64_t vocab_size() const override { return 256; }
  int64_t eos_id() const override { return -1; }
  int64_t bos_id() const override { return -1; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  Result<std::string> decode(const std::vector<int32_t>& ids) const override {
    std::string out(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] < 0 || ids[i] > 255)
        return Error(Code::kInvalidArgument,
                     fmt::format("token id {} is outside the byte vocabulary (0..255)", ids[i]));
      out[i] = static_cast<char>(ids[i]);
    }
    return out;
  }
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> open_tokenizer(const std::string& spec) {
  if (spec == "bytes") return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
  if (spec.empty())
    return Error(Code::kInvalidArgument, "no tokenizer given",
                 "pass --tokenizer bytes, a tokenizer.json (or its folder) or a SentencePiece "
                 ".model file");
  std::error_code ec;
  const std::filesystem::path p(spec);
  // A folder gpulab exported holds tokenizer.model and its tokenizer.json form: the model rules.
  if (std::filesystem::is_regular_file(p / "tokenizer.model", ec))
    return open_sentencepiece(p / "tokenizer.model");
  if (p.extension() == ".json" || std::filesystem::is_directory(p, ec)) return open_hf_tokenizer(p);
  return open_sentencepiece(spec);
}

}  // namespace gpulab::train
