// The pieces of gpulab's tokenizer.json reader, each on inputs whose answer follows from the
// rule it implements: GPT-2's byte table, the BPE merge loop, the added-token split, the PCRE2
// pre-tokenizer expressions, and the refusal of every tokenizer.json kind gpulab does not read.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "core/json.h"
#include "core/utf8.h"
#include "support/temp_dir.h"
#include "train/data/hf_added_tokens.h"
#include "train/data/hf_bpe.h"
#include "train/data/hf_byte_map.h"
#include "train/data/hf_pretokenizer.h"
#include "train/data/tokenizer.h"

namespace gpulab::train::hf {
namespace {

TEST(HfByteMap, IsABijectionOfPrintableCharacters) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t c = byte_to_char(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(c).second) << "byte " << b << " shares its character";
    EXPECT_EQ(char_to_byte(c), static_cast<uint8_t>(b));
    EXPECT_GT(c, U' ') << "byte " << b << " is spelled with a control or space character";
  }
  // The printable Latin-1 bytes stand for themselves; the 68 others follow U+0100 in byte order:
  // 0x00..0x20 are the first 33 of them, so space is U+0120 ('Ġ') and newline U+010A ('Ċ').
  EXPECT_EQ(byte_to_char('A'), U'A');
  EXPECT_EQ(byte_to_char(0xE9), U'\u00E9');
  EXPECT_EQ(byte_to_char(0x00), U'\u0100');
  EXPECT_EQ(byte_to_char(' '), U'\u0120');
  EXPECT_EQ(byte_to_char('\n'), U'\u010A');
  EXPECT_EQ(byte_to_char(0x7F), U'\u0121');
  EXPECT_EQ(byte_to_char(0xAD), U'\u0143');  // the last: the 68th
  EXPECT_FALSE(char_to_byte(U'\u0144').has_value());
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(unspell(spell_bytes(all)), all);
  EXPECT_FALSE(unspell("\xE4\xB8\xAD").has_value());  // '中' is no byte's spelling
}

TEST(HfByteMap, DecodesOnlyWellFormedUtf8) {
  for (std::string bad : {"\xC0\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xB8", "\x80"}) {
    size_t i = 0;
    EXPECT_FALSE(decode_utf8(bad, i).has_value()) << "accepted ill-formed UTF-8";
    EXPECT_EQ(i, 0U);
  }
  size_t i = 0;
  EXPECT_EQ(decode_utf8("\xF0\x9F\x98\x80", i), U'\U0001F600');
  EXPECT_EQ(i, 4U);
}

// A vocabulary of the 256 byte characters (ids 0..255) plus `extra` tokens after them.
std::unordered_map<std::string, int32_t> byte_vocab(const std::vector<std::string>& extra) {
  std::unordered_map<std::string, int32_t> v;
  for (int b = 0; b < 256; ++b) v[spell_bytes(std::string(1, static_cast<char>(b)))] = b;
  for (const auto& t : extra) v.emplace(t, static_cast<int32_t>(v.size()));
  return v;
}

std::vector<int32_t> encode(const BpeModel& m, std::string_view s) {
  std::vector<int32_t> out;
  PieceCache cache;
  m.encode_piece(s, out, cache);
  return out;
}

TEST(HfBpe, MergesTheLowestRankFirstAndTheLeftmostOfEqualOnes) {
  // ids: ab 256, bc 257, abc 258, aa 259.
  auto m = BpeModel::build(byte_vocab({"ab", "bc", "abc", "aa"}),
                           {{"b", "c"}, {"a", "b"}, {"ab", "c"}, {"a", "a"}}, false)
               .value_or_throw();
  // "bc" outranks "ab", and then "a"+"bc" is no merge: [a, bc], never [abc].
  EXPECT_EQ(encode(m, "abc"), (std::vector<int32_t>{'a', 257}));
  // "abab": both "ab" at rank 1 merge; there is no "abab".
  EXPECT_EQ(encode(m, "abab"), (std::vector<int32_t>{256, 256}));
  // "aaa": the leftmost pair merges first, leaving the last a alone.
  EXPECT_EQ(encode(m, "aaa"), (std::vector<int32_t>{259, 'a'}));
  EXPECT_EQ(encode(m, "abx"), (std::vector<int32_t>{256, 'x'}));
  EXPECT_EQ(encode(m, "\n"), (std::vector<int32_t>{'\n'}));
  EXPECT_EQ(m.bytes_of(258), "abc");
  EXPECT_EQ(m.id_end(), 260);
}

TEST(HfBpe, IgnoreMergesTakesAWholeTokenAsItIs) {
  auto vocab = byte_vocab({"bc", "abc"});
  auto merging = BpeModel::build(vocab, {{"b", "c"}}, false).value_or_throw();
  auto whole = BpeModel::build(vocab, {{"b", "c"}}, true).value_or_throw();
  EXPECT_EQ(encode(merging, "abc"), (std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(encode(whole, "abc"), (std::vector<int32_t>{257}));
  EXPECT_EQ(encode(whole, "abcc"), (std::vector<int32_t>{'a', 256, 'c'}));
}

TEST(HfBpe, RefusesAVocabularyWithoutEveryByteOrAMergeOfUnknownTokens) {
  auto no_newline = byte_vocab({});
  no_newline.erase(spell_bytes("\n"));
  auto r = BpeModel::build(no_newline, {}, false);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("0x0a"), std::string::npos) << r.error().message;
  auto m = BpeModel::build(byte_vocab({}), {{"a", "b"}}, false);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("merge 0"), std::string::npos) << m.error().message;
}

std::vector<std::pair<std::string, int32_t>> segments(const AddedTokenSplitter& s,
                                                      std::string_view text) {
  std::vector<std::pair<std::string, int32_t>> out;
  for (const auto& seg : s.split(text)) out.emplace_back(std::string(seg.text), seg.id);
  return out;
}

TEST(HfAddedTokens, SplitsLeftmostThenLongest) {
  AddedTokenSplitter s({{"<|a|>", 10}, {"<|a|><|b|>", 11}, {"<|b|>", 12}, {"", 13}});
  using V = std::vector<std::pair<std::string, int32_t>>;
  EXPECT_EQ(segments(s, "x<|a|><|b|>y<|b|><|a|>"),
            (V{{"x", -1}, {"<|a|><|b|>", 11}, {"y", -1}, {"<|b|>", 12}, {"<|a|>", 10}}));
  EXPECT_EQ(segments(s, "<|a|"), (V{{"<|a|", -1}}));
  EXPECT_EQ(segments(s, ""), V{});
  EXPECT_EQ(segments(s, "<|b|>"), (V{{"<|b|>", 12}}));
}

TEST(HfAddedTokens, LstripAndRstripSwallowTheWhitespaceBesideThem) {
  AddedToken mask{"<mask>", 5};
  mask.lstrip = true;
  AddedToken end{"</s>", 6};
  end.rstrip = true;
  AddedTokenSplitter s({mask, end});
  using V = std::vector<std::pair<std::string, int32_t>>;
  // U+3000 (ideographic space) is whitespace too, as Rust's char::is_whitespace says.
  EXPECT_EQ(segments(s, "a \xE3\x80\x80 <mask> b</s> \n c"),
            (V{{"a", -1}, {" \xE3\x80\x80 <mask>", 5}, {" b", -1}, {"</s> \n ", 6}, {"c", -1}}));
}

std::vector<std::string> pieces(const char* pre_tokenizer_json, std::string_view text) {
  auto p =
      PreTokenizer::from_json(parse_json(pre_tokenizer_json).value_or_throw()).value_or_throw();
  std::deque<std::string> storage;
  std::vector<std::string_view> views;
  p.pieces(text, storage, views);
  return {views.begin(), views.end()};
}

TEST(HfPreTokenizer, Gpt2ExpressionKeepsTheLastSpaceForTheNextWord) {
  // \s+(?!\S): a run of spaces leaves its last one to the word after it (std::regex cannot).
  EXPECT_EQ(pieces(R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})",
                   "Hello   world's 42\n\n"),
            (std::vector<std::string>{"Hello", "  ", " world", "'s", " 42", "\n\n"}));
  EXPECT_EQ(pieces(R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":true})", "Hi"),
            (std::vector<std::string>{" Hi"}));
}

TEST(HfPreTokenizer, SplitIsolatedKeepsMatchesAndGapsRemovedDropsMatches) {
  const char* digits = R"({"type":"Sequence","pretokenizers":[
      {"type":"Split","pattern":{"Regex":"\\p{N}{1,3}"},"behavior":"Isolated","invert":false},
      {"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]})";
  EXPECT_EQ(pieces(digits, "ab1234567c"), (std::vector<std::string>{"ab", "123", "456", "7", "c"}));
  // Unicode digits count (UCP): Arabic-Indic ٣ is \p{N}.
  EXPECT_EQ(pieces(digits, "x\xD9\xA3y"), (std::vector<std::string>{"x", "\xD9\xA3", "y"}));
  const char* removed = R"({"type":"Sequence","pretokenizers":[
      {"type":"Split","pattern":{"String":"."},"behavior":"Removed","invert":false},
      {"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]})";
  EXPECT_EQ(pieces(removed, "a.b..c"), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(HfPreTokenizer, IllFormedUtf8FallsBetweenMatches) {
  EXPECT_EQ(
      pieces(R"({"type":"ByteLevel","add_prefix_space":false,"use_regex":true})", "ab\xFF\xFE cd"),
      (std::vector<std::string>{"ab", "\xFF\xFE", " cd"}));
}

// A minimal byte-level tokenizer.json with one part replaced.
Json minimal(const std::string& field, const Json& value) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[spell_bytes(std::string(1, static_cast<char>(b)))] = b;
  Json j = {{"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"use_regex", true}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"added_tokens", Json::array()},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", Json::array()}}}};
  if (field == "model.type")
    j["model"]["type"] = value;
  else if (field == "model.byte_fallback")
    j["model"]["byte_fallback"] = value;
  else if (!field.empty())
    j[field] = value;
  return j;
}

Result<std::unique_ptr<Tokenizer>> open_json(const Json& j) {
  gpulab::testing::TempDir dir("hftok");
  const auto path = dir.path / "tokenizer.json";
  std::ofstream(path) << j.dump();
  return open_tokenizer(dir.path.string());  // a folder holding one
}

TEST(HfTokenizerJson, RefusesWhatGpulabDoesNotImplementSayingWhatItIs) {
  struct Case {
    std::string field;
    Json value;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"model.type", "WordPiece", "WordPiece"},
      {"model.type", "Unigram", "Unigram"},
      {"model.byte_fallback", true, "byte fallback"},
      {"normalizer", Json::parse(R"({"type":"Lowercase"})"), "'Lowercase' normalizer"},
      {"pre_tokenizer", Json::parse(R"({"type":"Metaspace"})"), "'Metaspace'"},
      {"pre_tokenizer", Json::parse(R"({"type":"Whitespace"})"), "'Whitespace'"},
      {"pre_tokenizer",
       Json::parse(R"({"type":"Split","pattern":{"Regex":"x"},"behavior":"MergedWithPrevious"})"),
       "MergedWithPrevious"},
      {"pre_tokenizer", Json(), "not byte-level"},
      {"decoder", Json::parse(R"({"type":"WordPiece"})"), "'WordPiece' decoder"},
      {"added_tokens", Json::parse(R"([{"id":300,"content":"<x>","single_word":true}])"),
       "single_word"},
  };
  for (const auto& c : cases) {
    auto r = open_json(minimal(c.field, c.value));
    ASSERT_FALSE(r.ok()) << c.field << " " << c.value.dump() << " was accepted";
    EXPECT_EQ(r.error().code, Code::kUnsupported) << r.error().message;
    EXPECT_NE(r.error().message.find(c.says), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().hint.find("gpulab reads"), std::string::npos) << r.error().hint;
  }
  ASSERT_TRUE(open_json(minimal("", nullptr)).ok());
}

TEST(HfTokenizerJson, MalformedOrMissingFilesAreRefused) {
  auto bad = open_json(Json::array({1, 2}));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Code::kDataError);
  auto j = minimal("", nullptr);
  j["model"]["merges"] = Json::array({"a"});
  auto merge = open_json(j);
  ASSERT_FALSE(merge.ok());
  EXPECT_EQ(merge.error().code, Code::kDataError) << merge.error().message;
  // An id no vocabulary has is refused before any table of its size is made.
  auto huge = minimal("", nullptr);
  huge["model"]["vocab"]["x"] = 1 << 30;
  auto far = open_json(huge);
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.error().code, Code::kDataError) << far.error().message;
  gpulab::testing::TempDir empty("hftok-empty");
  auto none = open_tokenizer(empty.path.string());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, Code::kNotFound);
}

TEST(HfTokenizerJson, AddedTokensEncodeAsTheirIdsAndDecodeToTheirText) {
  auto j = minimal("", nullptr);
  j["added_tokens"] = Json::array({{{"id", 256}, {"content", "<|endoftext|>"}, {"special", true}}});
  auto tok = open_json(j).value_or_throw();
  EXPECT_EQ(tok->kind(), "hf-bpe");
  EXPECT_EQ(tok->vocab_size(), 257);
  EXPECT_EQ(tok->eos_id(), 256);  // a known end-of-text name, no tokenizer_config.json
  EXPECT_EQ(tok->bos_id(), -1);
  const std::string text = "a<|endoftext|> \xFF";
  const auto ids = tok->encode(text);
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 256, ' ', 0xFF}));
  EXPECT_EQ(tok->decode(ids).value_or_throw(), text);
  EXPECT_EQ(tok->decode({257}).error().code, Code::kInvalidArgument);
}

}  // namespace
}  // namespace gpulab::train::hf
