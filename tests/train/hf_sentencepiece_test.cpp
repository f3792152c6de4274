// The tokenizer.json form of a SentencePiece model against Hugging Face itself: for BPE and
// Unigram models (with and without byte fallback) trained by gpulab,
// the `tokenizers` library reading the file encodes every text of a corpus, and the hard cases
// (leading and doubled spaces, tabs, digits, characters the model never saw), to SentencePiece's
// ids and decodes them back; a run folder loads in transformers' AutoTokenizer with no
// sentencepiece package; models whose form would differ are refused, and damaged files named.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/json.h"
#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "train/data/hf_sentencepiece.h"
#include "train/data/tokenizer.h"
#include "train/torchvision_python.h"
#include "train/trainer_test_util.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;
const fs::path kFortunes = "/usr/share/games/fortunes";

// The texts compared: every paragraph of fortunes the models did not train on, and the cases
// where a converted SentencePiece model most often goes wrong.
std::vector<std::string> texts() {
  std::vector<std::string> out = {"This License",
                                  " one leading space",
                                  "   three, and  two  inside",
                                  "trailing  ",
                                  "tabs\tand\n\nnew lines\n",
                                  "digits 12345 and 3.14159",
                                  "Ünïcödé, 日本語 and 🙂 the models never saw",
                                  "a",
                                  " ",
                                  ""};
  const std::string art = read_file(kFortunes / "art").value_or_throw();
  for (size_t at = 0; at < art.size();) {
    const size_t end = std::min(art.find("\n%\n", at), art.size());
    out.push_back(art.substr(at, end - at));
    at = end + 3;
  }
  return out;
}

Json reference(const std::vector<std::string>& args, const fs::path& texts_file) {
  const std::string py =
      testing::python_with(args[0] == "--folder" ? "transformers" : "tokenizers");
  if (py.empty()) ADD_FAILURE() << testing::reference_missing("tokenizers and transformers");
  std::vector<std::string> argv{
      py, std::string(GPULAB_SOURCE_DIR) + "/tests/parity/hf_sentencepiece.py"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--texts", texts_file.string()});
  auto r = run_process(argv, testing::reference_run());
  EXPECT_TRUE(r.ok() && r->success()) << testing::reference_failure(r);
  return r.ok() && r->success() ? Json::parse(r->out) : Json();
}

// Hugging Face's ids and text for each text equal SentencePiece's (the text itself where the
// model has byte fallback; where it has none, an unknown character decodes differently).
void expect_same_as_sentencepiece(const Tokenizer& tok, const Json& theirs,
                                  const std::vector<std::string>& all, bool byte_fallback) {
  ASSERT_TRUE(theirs.is_object());
  size_t differ = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::vector<int32_t> ids = tok.encode(all[i]);
    const auto hf_ids = theirs["ids"][i].get<std::vector<int32_t>>();
    const bool same = hf_ids == ids && (!byte_fallback || theirs["decoded"][i] == all[i]);
    if (!same && ++differ <= 3)
      ADD_FAILURE() << theirs["reader"] << " differs on \"" << all[i].substr(0, 80)
                    << "\": " << Json(hf_ids).dump().substr(0, 200) << " against SentencePiece's "
                    << Json(ids).dump().substr(0, 200) << ", decoded " << theirs["decoded"][i];
  }
  EXPECT_EQ(differ, 0U) << "of " << all.size() << " texts";
  std::printf("%s: %zu texts, the same ids as SentencePiece\n",
              theirs["reader"].get<std::string>().c_str(), all.size());
}

struct SpCase {
  const char* name;
  const char* model_type;
  bool byte_fallback;
};

void PrintTo(const SpCase& c, std::ostream* os) {
  *os << c.name;
}  // ctest's name: no addresses

class HfSentencePiece : public ::testing::TestWithParam<SpCase> {};

TEST_P(HfSentencePiece, TokenizersEncodesAsSentencePiece) {
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("any.model").error().message;
  gpulab::testing::TempDir dir{"hf_spm"};
  TokenizerTrainOptions o;
  o.inputs = {kFortunes / "literature", kFortunes / "love", kFortunes / "science"};
  o.vocab_size = 1200;
  o.model_type = GetParam().model_type;
  o.byte_fallback = GetParam().byte_fallback;
  o.out_dir = dir.path / "tok";
  const fs::path model = train_sentencepiece(o).value_or_throw();
  auto form = hf::sentencepiece_tokenizer_json(read_file(model).value_or_throw());
  ASSERT_TRUE(form.ok()) << form.error().to_string();
  ASSERT_TRUE(write_file_atomic(dir.path / "tokenizer.json", form->dump()).ok());
  const std::vector<std::string> all = texts();
  ASSERT_GT(all.size(), 300U);
  ASSERT_TRUE(write_file_atomic(dir.path / "texts.json", Json(all).dump()).ok());
  const Json theirs = reference({"--tokenizer_json", (dir.path / "tokenizer.json").string()},
                                dir.path / "texts.json");
  const auto tok = open_tokenizer(model.string()).value_or_throw();
  expect_same_as_sentencepiece(*tok, theirs, all, o.byte_fallback);
}

INSTANTIATE_TEST_SUITE_P(Models, HfSentencePiece,
                         ::testing::Values(SpCase{"Bpe", "bpe", true},
                                           SpCase{"BpeNoByteFallback", "bpe", false},
                                           SpCase{"Unigram", "unigram", true}),
                         [](const auto& info) { return std::string(info.param.name); });

// The user's path: a run trained on SentencePiece tokens; its folder loads in AutoTokenizer (the
// pinned environment has no sentencepiece or protobuf package) and encodes as gpulab does.
TEST(HfSentencePieceRun, RunFolderLoadsInAutoTokenizer) {
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("any.model").error().message;
  gpulab::testing::TempDir dir{"hf_spm_run"};
  auto t = testing::run_gpulab(
      {"tokenizer", "train", "--input", (kFortunes / "literature").string(), "--input",
       (kFortunes / "love").string(), "--vocab_size", "800", "--out", (dir.path / "tok").string()});
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  t = testing::run_gpulab({"data", "tokenize", "--input", (kFortunes / "literature").string(),
                           "--tokenizer", (dir.path / "tok" / "tokenizer.model").string(),
                           "--block_bytes", "256", "--out", (dir.path / "data").string()});
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  const fs::path run = dir.path / "run";
  t = testing::run_gpulab({"train",
                           "--model",
                           "llama-tiny",
                           "--dataset",
                           "text",
                           "--data_dir",
                           (dir.path / "data").string(),
                           "--seq_len",
                           "32",
                           "--batch_size",
                           "4",
                           "--max_steps",
                           "2",
                           "--device",
                           "cpu",
                           "--threads",
                           "2",
                           "--no_report",
                           "--output_dir",
                           run.string()});
  ASSERT_EQ(t.exit_code, 0) << t.out << t.err;
  ASSERT_TRUE(fs::exists(run / "tokenizer.json") && fs::exists(run / "tokenizer.model"));
  const std::vector<std::string> all = texts();
  ASSERT_TRUE(write_file_atomic(dir.path / "texts.json", Json(all).dump()).ok());
  const Json theirs = reference({"--folder", run.string()}, dir.path / "texts.json");
  // The run folder as gpulab opens it (its tokenizer.model: the folder rule prefers it).
  const auto tok = open_tokenizer(run.string()).value_or_throw();
  EXPECT_EQ(tok->kind(), "sentencepiece");
  expect_same_as_sentencepiece(*tok, theirs, all, true);
}

// Protobuf's wire format, to write the models the refusals need.
std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += static_cast<char>((v & 0x7f) | 0x80);
  return s + static_cast<char>(v);
}
std::string field(int number, const std::string& bytes) {
  return varint(static_cast<uint64_t>(number) << 3 | 2) + varint(bytes.size()) + bytes;
}
std::string field(int number, uint64_t value) {
  return varint(static_cast<uint64_t>(number) << 3) + varint(value);
}
std::string piece(const std::string& text, float score, int type = 1) {
  std::string f(4, '\0');
  std::memcpy(f.data(), &score, 4);
  return field(1, field(1, text) + varint(2 << 3 | 5) + f + field(3, uint64_t(type)));
}
// <unk>, a, b, c, ab, bc, abc in SentencePiece BPE's order (a later piece, a lower score).
std::string abc_model(const std::string& trainer, const std::string& normalizer) {
  return piece("<unk>", 0, 2) + piece("ab", -1) + piece("bc", -2) + piece("abc", -3) +
         piece("a", -4) + piece("b", -5) + piece("c", -6) + field(2, trainer) +
         field(3, normalizer);
}
const std::string kBpe = field(3, uint64_t(2));
const std::string kKeepSpaces = field(1, std::string("identity")) + field(4, uint64_t(0));

TEST(HfSentencePieceForm, MergesFollowTheWholePiecesScore) {
  const Json form = hf::sentencepiece_tokenizer_json(abc_model(kBpe, kKeepSpaces)).value_or_throw();
  // ab, then bc, then abc's two splits (its score; then the left part's id: ab before a).
  EXPECT_EQ(form["model"]["merges"], Json::parse(R"([["a","b"],["b","c"],["ab","c"],["a","bc"]])"));
  EXPECT_EQ(form["model"]["vocab"]["abc"], 3);
  EXPECT_EQ(form["model"]["unk_token"], "<unk>");
  EXPECT_EQ(form["added_tokens"].size(), 1U);
  EXPECT_EQ(form["normalizer"]["normalizers"][0]["type"], "Prepend");
}

TEST(HfSentencePieceForm, RefusesWhatItCannotSayAndNamesDamage) {
  const auto refused = [](const std::string& model, const std::string& why) {
    auto r = hf::sentencepiece_tokenizer_json(model);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.error().code, Code::kUnsupported) << r.error().message;
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
  };
  refused(abc_model(kBpe, field(1, std::string("identity"))), "collapses runs of whitespace");
  refused(abc_model(kBpe, kKeepSpaces + field(2, std::string("\x01\x02"))), "normalizes");
  refused(abc_model(field(3, uint64_t(4)), kKeepSpaces), "word or character model");
  // A user-defined symbol ("<|im_end|>", type 4) beside the dummy prefix (on by default).
  refused(piece("<|im_end|>", 0, 4) + abc_model(kBpe, kKeepSpaces), "user-defined symbols");
  const std::string good = abc_model(kBpe, kKeepSpaces);
  // Cut inside a field, not protobuf, no pieces at all, a piece twice, a piece that is no UTF-8.
  for (const std::string& bad :
       {good.substr(0, good.size() - 1), std::string("not a model"), std::string(),
        piece("a", 0) + piece("a", 0) + field(3, kKeepSpaces),
        piece("\xff", 0) + field(3, kKeepSpaces)}) {
    auto r = hf::sentencepiece_tokenizer_json(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Code::kDataError) << r.error().message;
    EXPECT_NE(r.error().hint.find("tokenizer.model"), std::string::npos);
  }
  // Damage anywhere in a real model is an answer, never a crash.
  if (!sentencepiece_available()) return;
  gpulab::testing::TempDir dir{"hf_spm_bad"};
  // A file of another kind passed as the model is named for what it looks like.
  ASSERT_TRUE(write_file_atomic(dir.path / "ckpt.pt", std::string("PK\x03\x04rest", 8)).ok());
  auto wrong = open_tokenizer((dir.path / "ckpt.pt").string());
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message.find("a PyTorch checkpoint"), std::string::npos)
      << wrong.error().message;
  TokenizerTrainOptions o;
  o.inputs = {kFortunes / "love"};
  o.vocab_size = 400;
  o.out_dir = dir.path;
  const std::string real = read_file(train_sentencepiece(o).value_or_throw()).value_or_throw();
  ASSERT_TRUE(hf::sentencepiece_tokenizer_json(real).ok());
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string m = real;
    m[rng() % m.size()] = static_cast<char>(rng());
    if (i % 2) m.resize(rng() % m.size());
    auto r = hf::sentencepiece_tokenizer_json(m);
    if (r.ok()) (void)r->dump();  // a form it accepts is valid JSON text
  }
}

}  // namespace
}  // namespace gpulab::train
