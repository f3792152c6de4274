// Tokenizer training over vocabulary sizes x corpus sizes x scripts (Latin, Chinese, emoji,
// mixed) x model types, through the real SentencePiece module: every case ends in a model that
// round-trips its text or in kInvalidArgument whose hint names only gpulab's flags and, followed,
// trains (issue 43: a vocabulary the corpus could not fill crashed gpulab, and the hint pointed
// the wrong way). Also the cause of that crash, input that is not text, and the issue's own
// commands through the binary.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <set>

#include "core/files.h"
#include "core/utf8.h"
#include "train/data/tokenize_corpus.h"
#include "train/data/tokenizer.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

using testing::temp_dir;

// One code point as UTF-8.
std::string utf8(char32_t c) {
  std::string s;
  append_utf8(s, c);
  return s;
}

// One "word" of a script: Latin letters, CJK ideographs, emoji, or any of those and Cyrillic.
// Skewed choices (the square of a uniform draw) give the repeats real text has, so merges exist.
std::string word(const std::string& script, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  const auto pick = [&](char32_t base, int span) {
    return utf8(base + static_cast<char32_t>(u(rng) * u(rng) * span));
  };
  std::string w;
  const int len = 1 + static_cast<int>(u(rng) * 6);
  std::string s = script;
  if (s == "mixed")
    s = std::vector<std::string>{"latin", "chinese", "emoji", "cyrillic"}[rng() % 4];
  for (int i = 0; i < len; ++i) {
    if (s == "latin") w += pick(U'a', 26);
    if (s == "chinese") w += pick(0x4E00, 3000);
    if (s == "emoji") w += pick(0x1F600, 80);
    if (s == "cyrillic") w += pick(0x0430, 32);
  }
  return w;
}

// About `bytes` bytes of lines of words separated by the script's own punctuation and spaces.
std::string corpus(const std::string& script, size_t bytes, unsigned seed) {
  std::mt19937 rng(seed);
  std::string text, line;
  while (text.size() + line.size() < bytes) {
    line += word(script, rng);
    line += script == "chinese" ? (rng() % 5 == 0 ? "，" : "") : " ";
    if (line.size() > 60 || text.size() + line.size() >= bytes) {
      text += line + "\n";
      line.clear();
    }
  }
  return text.empty() ? word(script, rng) + "\n" : text;
}

// Every --flag in an error a user reads must be one `gpulab tokenizer train` has.
void expect_only_our_flags(const Error& e) {
  static const std::set<std::string> kFlags = {"--input",
                                               "--vocab_size",
                                               "--model_type",
                                               "--out",
                                               "--max_sentences",
                                               "--threads",
                                               "--character_coverage",
                                               "--byte_fallback",
                                               "--user_defined_symbols",
                                               "--help"};
  const std::string all = e.message + " " + e.hint;
  const std::regex flag("--[a-z_]+");
  for (auto it = std::sregex_iterator(all.begin(), all.end(), flag); it != std::sregex_iterator();
       ++it)
    EXPECT_TRUE(kFlags.count(it->str())) << it->str() << " in: " << all;
}

// A trained model has the vocabulary asked for and gives back any line of its corpus exactly.
void expect_model(const fs::path& model, const TokenizerTrainOptions& o, const std::string& text) {
  auto tok = open_tokenizer(model.string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ((*tok)->vocab_size(), o.vocab_size);
  const std::string line = text.substr(0, text.find('\n'));
  EXPECT_EQ((*tok)->decode((*tok)->encode(line)).value_or_throw(), line);
}

// Trains one case (*trained: at the first try). A refusal must say which way to go and,
// followed, train.
void train_case(TokenizerTrainOptions o, const std::string& text, bool* trained = nullptr) {
  auto r = train_sentencepiece(o);
  if (trained) *trained = r.ok();
  if (r.ok()) return expect_model(*r, o, text);
  const Error& e = r.error();
  ASSERT_EQ(e.code, Code::kInvalidArgument) << e.message;
  expect_only_our_flags(e);
  std::smatch m;
  const std::regex less("--vocab_size (\\d+) or less"), more("--vocab_size (\\d+) or more");
  if (std::regex_search(e.hint, m, less)) {
    EXPECT_LT(std::stoll(m[1]), o.vocab_size) << e.hint;
  } else if (std::regex_search(e.hint, m, more)) {
    EXPECT_GT(std::stoll(m[1]), o.vocab_size) << e.hint;
  } else {
    FAIL() << "a refusal without a vocabulary to pass: " << e.message << " / " << e.hint;
  }
  o.vocab_size = std::stoll(m[1]);
  auto again = train_sentencepiece(o);
  ASSERT_TRUE(again.ok()) << "following \"" << e.hint << "\": " << again.error().message;
  expect_model(*again, o, text);
}

TEST(TokenizerFuzz, EveryVocabularyCorpusAndScriptTrainsOrSaysWhichWay) {
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("x.model").error().message;
  auto root = temp_dir("tok_fuzz");
  int trained = 0, refused = 0;
  for (const std::string script : {"latin", "chinese", "emoji", "mixed"})
    for (const size_t bytes : {20, 1500, 8000}) {
      const std::string text = corpus(script, bytes, static_cast<unsigned>(bytes));
      const auto file = root / (script + std::to_string(bytes) + ".txt");
      ASSERT_TRUE(write_file_atomic(file, text).ok());
      for (const int64_t vocab : {260, 300, 2000, 32000})
        for (const std::string type : {"bpe", "unigram"}) {
          SCOPED_TRACE(script + ", " + std::to_string(bytes) + " bytes, vocab " +
                       std::to_string(vocab) + ", " + type);
          TokenizerTrainOptions o{.inputs = {file}, .vocab_size = vocab, .model_type = type};
          o.out_dir = root / "out";
          o.threads = 1;
          bool ok = false;
          train_case(o, text, &ok);
          (ok ? trained : refused) += 1;
        }
    }
  std::printf("tokenizer fuzz: %d trained, %d refused with a hint that then trained\n", trained,
              refused);
  EXPECT_GT(trained, 0);
  EXPECT_GT(refused, 0);
  fs::remove_all(root);
}

TEST(TokenizerFuzz, OtherModelTypesCoverageAndSymbols) {
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("x.model").error().message;
  auto root = temp_dir("tok_opts");
  const std::string text = corpus("mixed", 20000, 7);
  ASSERT_TRUE(write_file_atomic(root / "m.txt", text).ok());
  TokenizerTrainOptions o{.inputs = {root / "m.txt"}, .vocab_size = 400};
  o.out_dir = root / "out";
  for (const std::string type : {"char", "word"})
    for (const bool fallback : {true, false}) {
      SCOPED_TRACE(type + (fallback ? ", byte fallback" : ", no byte fallback"));
      o.model_type = type;
      o.byte_fallback = fallback;
      auto r = train_sentencepiece(o);
      if (!r.ok()) {
        EXPECT_EQ(r.error().code, Code::kInvalidArgument) << r.error().message;
        expect_only_our_flags(r.error());
      }
    }
  // A lower coverage leaves rare characters to bytes: a smaller vocabulary then suffices.
  o.model_type = "bpe";
  o.byte_fallback = true;
  o.vocab_size = 300;
  auto full = train_sentencepiece(o);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().hint.find("--character_coverage"), std::string::npos);
  o.character_coverage = 0.98;
  train_case(o, text);
  // User-defined symbols are one piece each.
  ASSERT_TRUE(write_file_atomic(root / "latin.txt", corpus("latin", 5000, 3)).ok());
  o.inputs = {root / "latin.txt"};
  o.vocab_size = 400;
  o.user_defined_symbols = {"<|im_end|>", "<tool>"};
  auto model = train_sentencepiece(o).value_or_throw();
  auto tok = open_tokenizer(model.string()).value_or_throw();
  const auto ids = tok->encode("ab<|im_end|>cd<tool>");
  EXPECT_NE(std::find(ids.begin(), ids.end(), 3), ids.end());  // ids 3, 4: after unk, bos, eos
  EXPECT_NE(std::find(ids.begin(), ids.end(), 4), ids.end());
  EXPECT_EQ(tok->decode(ids).value_or_throw(), "ab<|im_end|>cd<tool>");
  // Bad options, refused before any text is read.
  for (auto bad : std::vector<std::function<void(TokenizerTrainOptions&)>>{
           [](auto& b) { b.model_type = "wordpiece"; }, [](auto& b) { b.character_coverage = 0; },
           [](auto& b) { b.character_coverage = 1.5; },
           [](auto& b) { b.user_defined_symbols = {"a,b"}; },
           [](auto& b) {
             b.user_defined_symbols = {"x", "x"};
           },
           [](auto& b) { b.user_defined_symbols = {"</s>"}; },
           [](auto& b) { b.vocab_size = 259; }}) {
    TokenizerTrainOptions b = o;
    bad(b);
    auto r = train_sentencepiece(b);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Code::kInvalidArgument) << r.error().message;
    expect_only_our_flags(r.error());
  }
  fs::remove_all(root);
}

// Text that is not UTF-8 (tests/train/text_encoding_test.cpp has the cases) and empty input stop
// training before SentencePiece runs: kDataError naming the file, or "no text"; nothing written.
TEST(TokenizerFuzz, NotUtf8OrEmptyInputStopsBeforeTraining) {
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("x.model").error().message;
  auto root = temp_dir("tok_enc");
  std::string good;
  for (int i = 0; i < 100; ++i) good += "a line of good text " + std::to_string(i) + "\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"empty.txt", ""},
      {"blank.txt", "\n\n\n"},
      {"latin1.txt", good + "caf\xE9 cr\xE8me\n" + good},
      {"utf16.txt", std::string("\xFF\xFE", 2) + std::string("h\0i\0\n\0", 6)},
      {"nul.txt", good + std::string("nul\0byte\n", 9)},
  };
  for (const auto& [name, bytes] : bad) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(write_file_atomic(root / name, bytes).ok());
    auto s =
        train_sentencepiece({.inputs = {root / name}, .vocab_size = 300, .out_dir = root / "t"});
    ASSERT_FALSE(s.ok());
    const bool no_text = bytes.find_first_not_of('\n') == std::string::npos;
    EXPECT_EQ(s.error().code, no_text ? Code::kInvalidArgument : Code::kDataError);
    EXPECT_NE(s.error().message.find(no_text ? "no text" : name), std::string::npos)
        << s.error().message;
    EXPECT_FALSE(fs::exists(root / "t"));
  }
  auto r = testing::run_gpulab({"tokenizer", "train", "--input", (root / "latin1.txt").string(),
                                "--vocab_size", "300", "--out", (root / "t").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("latin1.txt:101: byte 0xE9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root / "t"));
  fs::remove_all(root);
}

// The cause of issue 43's crash, kept in view: this test binary uses std::cerr, so (a PIE) it holds
// a copy of it and libstdc++'s own object is never constructed; the deep-bound module must still
// write SentencePiece's warnings (minloglevel 1 here; gpulab asks for 2) to standard error.
int feed_lines(void* ctx, const char** line, size_t* len) {
  auto* n = static_cast<int*>(ctx);
  static thread_local std::string text;
  if ((*n)++ >= 50) return 0;
  text = "hello world, line " + std::to_string(*n);
  *line = text.data();
  *len = text.size();
  return 1;
}

TEST(TokenizerFuzz, ModuleWritesWarningsThroughTheProgramsStderr) {
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("x.model").error().message;
  std::cerr << std::flush;  // the reference that makes the copy
  void* libstdcxx = ::dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libstdcxx, nullptr);
  ASSERT_NE(::dlsym(libstdcxx, "_ZSt4cerr"), static_cast<void*>(&std::cerr))
      << "no copy of std::cerr in this binary: the test would not reproduce the crash";
  const auto module = fs::path(GPULAB_BINARY).parent_path() / "libgpulab_spm.so";
  void* h = ::dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  ASSERT_NE(h, nullptr) << ::dlerror();
  using TrainFn =
      char* (*)(const char*, int (*)(void*, const char**, size_t*), void*, size_t*, char*, size_t);
  auto train = reinterpret_cast<TrainFn>(::dlsym(h, "gpulab_spm_train"));
  ASSERT_NE(train, nullptr);
  int n = 0;
  char err[512] = {0};
  size_t len = 0;
  ::testing::internal::CaptureStderr();
  char* model = train("model_type=bpe\nvocab_size=2000\nbyte_fallback=true\nminloglevel=1\n",
                      &feed_lines, &n, &len, err, sizeof err);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(model, nullptr);
  std::free(model);
  EXPECT_NE(std::string(err).find("too high"), std::string::npos) << err;
  EXPECT_NE(said.find("No valid symbol found"), std::string::npos) << said;
  ::dlclose(h);
}

// The issue's commands, through the binary: an exit status and a message, never a signal.
TEST(TokenizerFuzz, IssueCommandsEndWithAModelOrAHint) {
  if (!fs::exists(GPULAB_BINARY)) GTEST_SKIP() << "gpulab binary not built";
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("x.model").error().message;
  const fs::path licenses = "/usr/share/common-licenses";
  if (!fs::exists(licenses / "BSD")) GTEST_SKIP() << "no /usr/share/common-licenses (base-files)";
  auto root = temp_dir("tok_issue");
  for (const auto& [file, vocab] :
       std::vector<std::pair<std::string, std::string>>{{"BSD", "32000"}, {"GPL-3", "8000"}}) {
    auto r = testing::run_gpulab({"tokenizer", "train", "--input", (licenses / file).string(),
                                  "--vocab_size", vocab, "--out", (root / file).string()});
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find("or less"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(root / file));
  }
  auto r = testing::run_gpulab(
      {"tokenizer", "train", "--input", (licenses / "BSD").string(), "--vocab_size", "200",
       "--model_type", "unigram", "--character_coverage", "0.9995", "--byte_fallback", "false",
       "--user_defined_symbols", "<a>,<b>", "--out", (root / "ok").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(root / "ok" / "tokenizer.model"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpulab::train
