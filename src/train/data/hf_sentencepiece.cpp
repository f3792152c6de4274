// A SentencePiece model (its protobuf, read here field by field) -> tokenizers' tokenizer.json.
#include "train/data/hf_sentencepiece.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "core/utf8.h"

namespace gpulab::train::hf {
namespace {

// Protobuf's wire format, as much of it as sentencepiece_model.proto uses.
class Wire {
 public:
  explicit Wire(std::string_view s) : s_(s) {}
  bool done() const { return i_ >= s_.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto b = static_cast<uint8_t>(take(1)[0]);
      v |= uint64_t{b & 0x7fu} << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("a varint runs past 10 bytes");
  }
  std::string_view bytes() { return take(varint()); }
  float fixed32() {
    float f = 0;
    std::memcpy(&f, take(4).data(), 4);
    return f;
  }
  void skip(uint64_t wire_type) {
    if (wire_type == 0)
      varint();
    else if (wire_type == 1)
      take(8);
    else if (wire_type == 2)
      bytes();
    else if (wire_type == 5)
      take(4);
    else
      throw std::runtime_error(fmt::format("wire type {} is not protobuf's", wire_type));
  }

 private:
  std::string_view take(uint64_t n) {
    if (n > s_.size() - i_) throw std::runtime_error("a field runs past the end of the file");
    const auto out = s_.substr(i_, n);
    i_ += n;
    return out;
  }
  std::string_view s_;
  size_t i_ = 0;
};

// SentencePiece's piece types (sentencepiece_model.proto).
enum PieceType : int { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4 };
enum ModelType : int { kUnigram = 1, kBpe = 2 };

struct Piece {
  std::string text;
  float score = 0;
  int type = kNormal;
};

struct SpModel {
  std::vector<Piece> pieces;
  int model_type = kUnigram;
  bool byte_fallback = false;
  bool whitespace_as_suffix = false;
  bool has_rules = false;  // a normalization charsmap or rule table: NFKC and the like
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

Piece read_piece(std::string_view m) {
  Piece p;
  for (Wire w(m); !w.done();) {
    const uint64_t tag = w.varint();
    if (tag == (1 << 3 | 2))
      p.text = w.bytes();
    else if (tag == (2 << 3 | 5))
      p.score = w.fixed32();
    else if (tag == (3 << 3 | 0))
      p.type = static_cast<int>(w.varint());
    else
      w.skip(tag & 7);
  }
  return p;
}

void read_trainer_spec(std::string_view m, SpModel& sp) {
  for (Wire w(m); !w.done();) {
    const uint64_t tag = w.varint();
    if (tag == (3 << 3 | 0))
      sp.model_type = static_cast<int>(w.varint());
    else if (tag == (35 << 3 | 0))
      sp.byte_fallback = w.varint() != 0;
    else if (tag == (24 << 3 | 0))
      sp.whitespace_as_suffix = w.varint() != 0;
    else
      w.skip(tag & 7);
  }
}

void read_normalizer_spec(std::string_view m, SpModel& sp) {
  for (Wire w(m); !w.done();) {
    const uint64_t tag = w.varint();
    const uint64_t field = tag >> 3;
    if ((field == 2 || field == 6) && (tag & 7) == 2)
      sp.has_rules |= !w.bytes().empty();
    else if (field == 3 && (tag & 7) == 0)
      sp.add_dummy_prefix = w.varint() != 0;
    else if (field == 4 && (tag & 7) == 0)
      sp.remove_extra_whitespaces = w.varint() != 0;
    else if (field == 5 && (tag & 7) == 0)
      sp.escape_whitespaces = w.varint() != 0;
    else
      w.skip(tag & 7);
  }
}

SpModel read_model(std::string_view bytes) {
  SpModel sp;
  for (Wire w(bytes); !w.done();) {
    const uint64_t tag = w.varint();
    if (tag == (1 << 3 | 2))
      sp.pieces.push_back(read_piece(w.bytes()));
    else if (tag == (2 << 3 | 2))
      read_trainer_spec(w.bytes(), sp);
    else if (tag == (3 << 3 | 2))
      read_normalizer_spec(w.bytes(), sp);
    else
      w.skip(tag & 7);
  }
  return sp;
}

// What makes the file no SentencePiece model SentencePiece would load; empty when nothing does.
std::string damage(const SpModel& sp) {
  if (sp.pieces.empty()) return "it has no pieces";
  std::unordered_map<std::string_view, size_t> seen;
  for (size_t id = 0; id < sp.pieces.size(); ++id) {
    const std::string& t = sp.pieces[id].text;
    if (t.empty()) return fmt::format("piece {} is empty", id);
    for (size_t i = 0; i < t.size();)
      if (!decode_utf8(t, i)) return fmt::format("piece {} is not UTF-8", id);
    if (!seen.emplace(t, id).second) return fmt::format("piece {} repeats piece {}", id, seen[t]);
  }
  return {};
}

// Why the JSON form would encode some text differently; empty when it would not.
std::string mismatch(const SpModel& sp) {
  if (sp.model_type != kBpe && sp.model_type != kUnigram)
    return "is a word or character model (tokenizer.json forms exist for BPE and Unigram)";
  if (sp.has_rules) return "normalizes its text (NFKC or custom rules)";
  if (sp.remove_extra_whitespaces) return "collapses runs of whitespace";
  if (!sp.escape_whitespaces || sp.whitespace_as_suffix)
    return "does not mark spaces as a prefix U+2581";
  // tokenizers normalizes an added token's own text too, so with the dummy prefix "<x>" would
  // only match as "\u2581<x>"; unnormalized, each text after one would get a prefix of its own.
  for (const Piece& p : sp.pieces)
    if (p.type == kUserDefined && (sp.add_dummy_prefix || p.text.find(' ') != std::string::npos))
      return "has user-defined symbols (tokenizers matches them apart from SentencePiece's "
             "leading space)";
  return {};
}

Json replace(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

const std::string kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

// SentencePiece's normalization as tokenizers spells it: spaces become U+2581, and with
// add_dummy_prefix one more leads the text (always: SentencePiece adds it whatever the text
// starts with, which tokenizers' Metaspace would not).
Json normalizer(const SpModel& sp) {
  Json steps = Json::array();
  if (sp.add_dummy_prefix) steps.push_back({{"type", "Prepend"}, {"prepend", kSpace}});
  steps.push_back(replace(" ", kSpace));
  return {{"type", "Sequence"}, {"normalizers", steps}};
}

Json decoder(const SpModel& sp) {
  Json steps = {replace(kSpace, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
  if (sp.add_dummy_prefix)
    steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  return {{"type", "Sequence"}, {"decoders", steps}};
}

// Control and unknown pieces are special tokens; user-defined ones (only without the dummy
// prefix) are matched, as SentencePiece does, in the normalized text.
Json added_tokens(const SpModel& sp) {
  Json out = Json::array();
  for (size_t id = 0; id < sp.pieces.size(); ++id) {
    const Piece& p = sp.pieces[id];
    if (p.type != kUnknown && p.type != kControl && p.type != kUserDefined) continue;
    const bool special = p.type != kUserDefined;
    out.push_back({{"id", id},
                   {"content", p.text},
                   {"single_word", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"normalized", !special},
                   {"special", special}});
  }
  return out;
}

// BPE merges: every split of a normal piece into two normal pieces, in the order SentencePiece
// merges (the whole piece's score, highest first; then its id, then the left part's).
Json bpe_merges(const SpModel& sp) {
  std::unordered_map<std::string_view, size_t> normal;
  for (size_t id = 0; id < sp.pieces.size(); ++id)
    if (sp.pieces[id].type == kNormal) normal.emplace(sp.pieces[id].text, id);
  std::vector<std::tuple<float, size_t, size_t, size_t>> merges;  // -score, whole, left, right
  for (const auto& [text, id] : normal) {
    // Cut between characters (damage() checked that every piece is UTF-8).
    size_t cut = 0;
    for (decode_utf8(text, cut); cut < text.size(); decode_utf8(text, cut)) {
      const auto left = normal.find(text.substr(0, cut));
      const auto right = normal.find(text.substr(cut));
      if (left != normal.end() && right != normal.end())
        merges.emplace_back(-sp.pieces[id].score, id, left->second, right->second);
    }
  }
  std::sort(merges.begin(), merges.end());
  Json out = Json::array();
  for (const auto& [score, id, left, right] : merges)
    out.push_back({sp.pieces[left].text, sp.pieces[right].text});
  return out;
}

Json model(const SpModel& sp) {
  std::string unk;
  size_t unk_id = 0;
  for (size_t id = 0; id < sp.pieces.size(); ++id)
    if (sp.pieces[id].type == kUnknown) std::tie(unk, unk_id) = std::tuple(sp.pieces[id].text, id);
  if (sp.model_type == kUnigram) {
    Json vocab = Json::array();
    for (const Piece& p : sp.pieces) vocab.push_back({p.text, p.score});
    return {{"type", "Unigram"},
            {"unk_id", unk.empty() ? Json() : Json(unk_id)},
            {"vocab", vocab},
            {"byte_fallback", sp.byte_fallback}};
  }
  Json vocab = Json::object();
  for (size_t id = 0; id < sp.pieces.size(); ++id) vocab[sp.pieces[id].text] = id;
  return {{"type", "BPE"},
          {"dropout", nullptr},
          {"unk_token", unk.empty() ? Json() : Json(unk)},
          {"continuing_subword_prefix", nullptr},
          {"end_of_word_suffix", nullptr},
          {"fuse_unk", true},
          {"byte_fallback", sp.byte_fallback},
          {"ignore_merges", false},
          {"vocab", vocab},
          {"merges", bpe_merges(sp)}};
}

Error not_a_model(const std::string& why) {
  return Error(Code::kDataError, "this tokenizer.model is not a SentencePiece model: " + why,
               "pass the tokenizer.model that `gpulab tokenizer train` (or SentencePiece) wrote");
}

}  // namespace

Result<Json> sentencepiece_tokenizer_json(std::string_view bytes) {
  SpModel sp;
  try {
    sp = read_model(bytes);
  } catch (const std::runtime_error& e) {
    return not_a_model(e.what());
  }
  if (const std::string why = damage(sp); !why.empty()) return not_a_model(why);
  if (const std::string why = mismatch(sp); !why.empty())
    return Error(Code::kUnsupported,
                 "this SentencePiece model " + why + ", which tokenizer.json cannot say",
                 "read it with its tokenizer.model (transformers: the sentencepiece package)");
  return Json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", added_tokens(sp)},
              {"normalizer", normalizer(sp)},
              {"pre_tokenizer", nullptr},
              {"post_processor", nullptr},
              {"decoder", decoder(sp)},
              {"model", model(sp)}};
}

}  // namespace gpulab::train::hf
