// Pre-tokenizer steps of a byte-level tokenizer.json (see hf_pretokenizer.h).
#include "train/data/hf_pretokenizer.h"

#include <fmt/format.h>

namespace gpulab::train::hf {
namespace {

Error unsupported(const std::string& what) {
  return Error(Code::kUnsupported,
               "tokenizer.json's pre-tokenizer " + what + " is not one gpulab implements",
               "gpulab reads byte-level BPE tokenizer.json files (GPT-2, Llama 3, Qwen2 styles: "
               "ByteLevel, or Split expressions followed by ByteLevel), and SentencePiece "
               ".model files");
}

}  // namespace

Result<PreTokenizer::Step> PreTokenizer::split_step(const Json& j) {
  const std::string behavior = j.value("behavior", "");
  if (behavior != "Isolated" && behavior != "Removed")
    return unsupported("Split with behavior '" + behavior + "' (gpulab: Isolated, Removed)");
  if (j.value("invert", false)) return unsupported("Split with invert: true");
  const Json& p = j.contains("pattern") ? j.at("pattern") : Json();
  std::string pattern;
  if (p.is_object() && p.contains("Regex") && p.at("Regex").is_string()) {
    pattern = p.at("Regex").get<std::string>();
  } else if (p.is_object() && p.contains("String") && p.at("String").is_string()) {
    pattern = "\\Q" + p.at("String").get<std::string>() + "\\E";  // the literal text
  } else {
    return unsupported("Split without a Regex or String pattern");
  }
  auto re = Regex::compile(pattern);
  if (!re) return re.error();
  Step s;
  s.regex = std::move(*re);
  s.has_regex = true;
  s.keep_matches = behavior == "Isolated";
  return s;
}

Result<PreTokenizer::Step> PreTokenizer::byte_level_step(const Json& j, bool last) {
  if (!last) return unsupported("step after ByteLevel");
  Step s;
  s.prefix_space = j.value("add_prefix_space", false);
  if (j.value("use_regex", true)) {
    auto re = Regex::compile(kGpt2Pattern);
    if (!re) return re.error();
    s.regex = std::move(*re);
    s.has_regex = true;
  }
  return s;
}

Result<PreTokenizer> PreTokenizer::from_json(const Json& j) {
  if (!j.is_object()) return unsupported(j.is_null() ? "(none: not byte-level)" : j.dump());
  std::vector<const Json*> list;
  const std::string type = j.value("type", "");
  if (type == "Sequence" && j.contains("pretokenizers") && j.at("pretokenizers").is_array()) {
    for (const Json& s : j.at("pretokenizers")) list.push_back(&s);
  } else {
    list.push_back(&j);
  }
  PreTokenizer p;
  for (size_t i = 0; i < list.size(); ++i) {
    const Json& s = *list[i];
    const std::string t = s.is_object() ? s.value("type", "") : "";
    Result<Step> step = t == "Split"       ? split_step(s)
                        : t == "ByteLevel" ? byte_level_step(s, i + 1 == list.size())
                                           : Result<Step>(unsupported("'" + t + "'"));
    if (!step) return step.error();
    p.steps_.push_back(std::move(*step));
    p.description_ += (i ? " + " : "") + t;
  }
  if (list.empty() || list.back()->value("type", "") != "ByteLevel")
    return unsupported(fmt::format("'{}' without a final ByteLevel step (not byte-level BPE)",
                                   p.description_.empty() ? type : p.description_));
  return p;
}

void PreTokenizer::pieces(std::string_view text, std::deque<std::string>& storage,
                          std::vector<std::string_view>& out) const {
  std::vector<std::string_view> cur{text}, next;
  for (const Step& s : steps_) {
    next.clear();
    for (std::string_view piece : cur) {
      if (piece.empty()) continue;
      if (s.prefix_space && piece.front() != ' ') {  // as `tokenizers`: one per incoming piece
        storage.push_back(" " + std::string(piece));
        piece = storage.back();
      }
      if (!s.has_regex) {
        next.push_back(piece);
        continue;
      }
      size_t at = 0;
      for (const auto& [b, e] : s.regex.find_all(piece)) {
        if (b > at) next.push_back(piece.substr(at, b - at));
        if (s.keep_matches) next.push_back(piece.substr(b, e - b));
        at = e;
      }
      if (at < piece.size()) next.push_back(piece.substr(at));
    }
    cur.swap(next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
}

}  // namespace gpulab::train::hf
