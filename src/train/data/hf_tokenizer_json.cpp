// tokenizer.json -> the parts of a byte-level BPE tokenizer (see hf_tokenizer_json.h).
#include "train/data/hf_tokenizer_json.h"

#include <fmt/format.h>

#include "train/data/hf_normalizer.h"

namespace gpulab::train::hf {
namespace {

constexpr const char* kReads =
    "gpulab reads byte-level BPE tokenizer.json files (GPT-2, Llama 3, Qwen2 styles) and "
    "SentencePiece .model files";

Error refuse(const std::string& what) {
  return Error(Code::kUnsupported, "this tokenizer.json " + what, kReads);
}

std::string type_of(const Json& j) {
  return j.is_object() ? j.value("type", std::string("?"))
                       : std::string(j.is_null() ? "none" : "?");
}

Result<bool> read_normalizer(const Json& j) {
  if (j.is_null()) return false;
  const std::string t = type_of(j);
  if (t == "NFC") {
    if (!nfc_available())
      return Error(Code::kUnsupported,
                   "this tokenizer.json asks for NFC normalization and this gpulab was built "
                   "without ICU",
                   "rebuild gpulab where libicu-dev is installed (scripts/install-deps.sh)");
    return true;
  }
  if (t == "Sequence" && j.contains("normalizers") && j.at("normalizers").is_array() &&
      j.at("normalizers").empty())
    return false;
  if (t == "Sequence" && j.contains("normalizers") && j.at("normalizers").size() == 1)
    return read_normalizer(j.at("normalizers").at(0));
  return refuse("has a '" + t + "' normalizer (gpulab: none or NFC)");
}

std::vector<std::pair<std::string, std::string>> read_merges(const Json& m) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(m.size());
  for (const Json& e : m) {
    if (e.is_array() && e.size() == 2) {  // tokenizers >= 0.20: ["a", "b"]
      out.emplace_back(e.at(0).get<std::string>(), e.at(1).get<std::string>());
    } else {  // "a b": byte-level tokens hold no space (it is spelled 'Ġ')
      const auto s = e.get<std::string>();
      const auto sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        throw std::invalid_argument("merge '" + s + "' is not two tokens");
      out.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  }
  return out;
}

Result<BpeModel> read_model(const Json& m) {
  const std::string t = type_of(m);
  if (t == "WordPiece") return refuse("holds a WordPiece model (BERT-style)");
  if (t == "Unigram")
    return refuse("holds a Unigram model (pass the model's SentencePiece tokenizer.model instead)");
  if (t != "BPE") return refuse("holds a '" + t + "' model");
  if (m.value("byte_fallback", false))
    return refuse("is a SentencePiece-style BPE with byte fallback (pass its tokenizer.model)");
  if (!m.value("continuing_subword_prefix", Json()).is_null() &&
      !m.at("continuing_subword_prefix").get<std::string>().empty())
    return refuse("has a continuing_subword_prefix (not byte-level BPE)");
  if (!m.value("end_of_word_suffix", Json()).is_null() &&
      !m.at("end_of_word_suffix").get<std::string>().empty())
    return refuse("has an end_of_word_suffix (not byte-level BPE)");
  if (m.contains("dropout") && !m.at("dropout").is_null() && m.at("dropout").get<double>() > 0)
    return refuse("sets BPE dropout (a training-time option: encoding would be random)");
  auto vocab = m.at("vocab").get<std::unordered_map<std::string, int32_t>>();
  return BpeModel::build(std::move(vocab), read_merges(m.at("merges")),
                         m.value("ignore_merges", false));
}

Result<std::vector<AddedToken>> read_added(const Json& list) {
  std::vector<AddedToken> out;
  if (list.is_null()) return out;
  for (const Json& a : list) {
    AddedToken t;
    t.content = a.at("content").get<std::string>();
    t.id = a.at("id").get<int32_t>();
    t.special = a.value("special", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.normalized = a.value("normalized", !t.special);
    if (a.value("single_word", false))
      return refuse("has an added token with single_word: true ('" + t.content +
                    "'), which gpulab does not implement");
    if (t.id < 0 || t.id >= BpeModel::kMaxId)
      return Error(Code::kDataError,
                   fmt::format("added token id {} is outside 0..{}", t.id, BpeModel::kMaxId - 1));
    out.push_back(std::move(t));
  }
  return out;
}

// A token named in tokenizer_config.json: a string or {"content": ...}.
std::string config_token(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return {};
  const Json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content")) return v.at("content").get<std::string>();
  return {};
}

// The special token a TemplateProcessing post-processor puts first (Llama 3's <|begin_of_text|>).
std::string leading_special(const Json& post) {
  if (!post.is_object()) return {};
  if (type_of(post) == "Sequence" && post.contains("processors"))
    for (const Json& p : post.at("processors"))
      if (auto s = leading_special(p); !s.empty()) return s;
  if (type_of(post) != "TemplateProcessing" || !post.contains("single")) return {};
  const Json& first = post.at("single").at(0);
  if (first.contains("SpecialToken")) return first.at("SpecialToken").at("id").get<std::string>();
  return {};
}

}  // namespace

Result<TokenizerParts> parse_tokenizer_json(const Json& tok, const Json& config) {
  try {
    if (!tok.is_object() || !tok.contains("model"))
      return Error(Code::kDataError, "this is not a tokenizer.json (no \"model\" object)", kReads);
    TokenizerParts p;
    auto model = read_model(tok.at("model"));
    if (!model) return model.error();
    auto nfc = read_normalizer(tok.value("normalizer", Json()));
    if (!nfc) return nfc.error();
    auto pre = PreTokenizer::from_json(tok.value("pre_tokenizer", Json()));
    if (!pre) return pre.error();
    const std::string dec = type_of(tok.value("decoder", Json()));
    if (dec != "ByteLevel") return refuse("has a '" + dec + "' decoder (gpulab: ByteLevel)");
    auto added = read_added(tok.value("added_tokens", Json()));
    if (!added) return added.error();
    p.bpe = std::move(*model);
    p.nfc = *nfc;
    p.pre = std::move(*pre);
    p.added = std::move(*added);
    const std::string leading = leading_special(tok.value("post_processor", Json()));
    p.bos = config_token(config, "bos_token");
    if (p.bos.empty()) p.bos = leading;
    p.prepend_bos = !leading.empty() && leading == p.bos;
    p.eos = config_token(config, "eos_token");
    return p;
  } catch (const std::exception& e) {  // a field of the wrong type, a missing vocab
    return Error(Code::kDataError, std::string("tokenizer.json is malformed: ") + e.what(), kReads);
  }
}

}  // namespace gpulab::train::hf
