// Token data for language models: token folders round trip, windows shard and resume, corrupt
// and short files fail cleanly, and the bundled real corpus (Debian's fortunes) tokenizes.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "core/files.h"
#include "train/data/token_file.h"
#include "train/data/token_windows.h"
#include "train/data/tokenize_corpus.h"
#include "train/data/tokenizer.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

using testing::temp_dir;

// Writes a folder holding ids 0..n-1 (mod vocab) in train and m ids in val.
fs::path write_counting(const fs::path& dir, int64_t n, int64_t m, int64_t vocab) {
  TokenMeta meta;
  meta.vocab_size = vocab;
  auto w = TokenWriter::create(dir, meta).value_or_throw();
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(i % vocab));
  EXPECT_TRUE(w->append(TokenWriter::Split::kTrain, ids, n * 3).ok());
  ids.clear();
  for (int64_t i = 0; i < m; ++i) ids.push_back(static_cast<int32_t>((i * 7) % vocab));
  EXPECT_TRUE(w->append(TokenWriter::Split::kVal, ids, m).ok());
  EXPECT_TRUE(w->finish().ok());
  return dir;
}

TEST(TokenFile, RoundTripsUint16AndUint32) {
  for (int64_t vocab : {int64_t{300}, int64_t{70000}}) {
    auto dir = write_counting(temp_dir("tok_rt") / "d", 100000, 999, vocab);
    auto data = TokenData::open(dir).value_or_throw();
    EXPECT_EQ(data.meta().dtype, vocab <= 65536 ? TokenDtype::kUint16 : TokenDtype::kUint32);
    EXPECT_EQ(fs::file_size(dir / "train.bin"),
              static_cast<uintmax_t>(100000 * token_width(data.meta().dtype)));
    ASSERT_EQ(data.train().size(), 100000);
    ASSERT_EQ(data.val().size(), 999);
    for (int64_t i : {int64_t{0}, int64_t{299}, int64_t{69999}, int64_t{99999}})
      EXPECT_EQ(data.train().at(i), i % vocab);
    EXPECT_EQ(data.val().at(998), (998 * 7) % vocab);
    EXPECT_DOUBLE_EQ(data.meta().bytes_per_token(), 3.0);
    EXPECT_DOUBLE_EQ(data.meta().val_bytes_per_token(), 1.0);
    EXPECT_TRUE(data.check_vocab(vocab).ok());
    auto small = data.check_vocab(vocab - 1);
    ASSERT_FALSE(small.ok());
    EXPECT_NE(small.error().message.find("vocabulary mismatch"), std::string::npos);
  }
}

TEST(TokenFile, TruncatedCorruptAndIncompleteFoldersFailClearly) {
  auto root = temp_dir("tok_bad");
  auto dir = write_counting(root / "d", 5000, 500, 256);
  ASSERT_TRUE(TokenData::open(dir).ok());
  // One byte short: the size disagrees with meta.json.
  fs::resize_file(dir / "train.bin", fs::file_size(dir / "train.bin") - 1);
  auto r = TokenData::open(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kDataError);
  EXPECT_NE(r.error().message.find("truncated"), std::string::npos) << r.error().message;
  EXPECT_FALSE(r.error().hint.empty());

  // Same size, one id changed: the checksum catches it.
  dir = write_counting(root / "e", 5000, 500, 256);
  {
    std::fstream f(dir / "val.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put(static_cast<char>(0x7f));
  }
  r = TokenData::open(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("checksum"), std::string::npos) << r.error().message;

  // meta.json without a field, or missing: not a token folder.
  auto text = read_file(dir / "meta.json").value_or_throw();
  auto pos = text.find("\"vocab_size\"");
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, 12, "\"vocab_sizes\"");
  ASSERT_TRUE(write_file_atomic(dir / "meta.json", text).ok());
  r = TokenData::open(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("vocab_size"), std::string::npos) << r.error().message;
  fs::remove(dir / "meta.json");
  EXPECT_EQ(TokenData::open(dir).error().code, Code::kNotFound);
  EXPECT_EQ(TokenData::open(root / "nothing").error().code, Code::kNotFound);

  // A writer refuses a folder that holds data, and one dropped unfinished leaves no files.
  dir = write_counting(root / "f", 10, 10, 256);
  EXPECT_EQ(TokenWriter::create(dir, TokenMeta{.vocab_size = 256}).error().code,
            Code::kAlreadyExists);
  {
    auto w = TokenWriter::create(root / "g", TokenMeta{.vocab_size = 256}).value_or_throw();
    ASSERT_TRUE(w->append(TokenWriter::Split::kTrain, {1, 2, 3}, 3).ok());
  }
  EXPECT_FALSE(fs::exists(root / "g"));
  fs::remove_all(root);
}

TEST(TokenWindows, TargetsAreInputsShiftedByOne) {
  auto dir = write_counting(temp_dir("tok_shift") / "d", 10000, 1000, 60000);
  auto data = TokenData::open(dir).value_or_throw();
  auto w = TokenWindows::create(data.train(), {.seq_len = 64, .batch_size = 4, .seed = 3})
               .value_or_throw();
  const auto starts = w.window_starts(5);
  auto b = w.batch(5);
  ASSERT_EQ(b.inputs.sizes(), (std::vector<int64_t>{4, 64}));
  EXPECT_EQ(b.inputs.dtype(), torch::kLong);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b.inputs[i][0].item<int64_t>(), starts[static_cast<size_t>(i)]);  // id == offset
    EXPECT_TRUE(torch::equal(b.inputs[i].slice(0, 1), b.targets[i].slice(0, 0, 63)));
    EXPECT_EQ(b.targets[i][63].item<int64_t>(), starts[static_cast<size_t>(i)] + 64);
  }
}

TEST(TokenWindows, TwoRanksAreDisjointCoverTheGlobalBatchAndResume) {
  auto dir = write_counting(temp_dir("tok_shard") / "d", 20000, 1000, 65536);
  auto data = TokenData::open(dir).value_or_throw();
  const WindowOptions one{.seq_len = 32, .batch_size = 8, .seed = 11};
  WindowOptions r0 = one, r1 = one;
  r0.batch_size = r1.batch_size = 4;
  r0.world_size = r1.world_size = 2;
  r1.rank = 1;
  auto single = TokenWindows::create(data.train(), one).value_or_throw();
  auto w0 = TokenWindows::create(data.train(), r0).value_or_throw();
  auto w1 = TokenWindows::create(data.train(), r1).value_or_throw();
  EXPECT_EQ(w0.steps_per_epoch(), single.steps_per_epoch());
  const int64_t steps = w0.steps_per_epoch();
  ASSERT_GT(steps, 10);
  std::set<int64_t> epoch0;
  for (int64_t s = 0; s < steps; ++s) {
    auto a = w0.window_starts(s), b = w1.window_starts(s), g = single.window_starts(s);
    std::set<int64_t> both(a.begin(), a.end());
    both.insert(b.begin(), b.end());
    EXPECT_EQ(both, std::set<int64_t>(g.begin(), g.end())) << "step " << s;
    for (auto x : both) EXPECT_TRUE(epoch0.insert(x).second) << "window " << x << " twice";
  }
  EXPECT_EQ(static_cast<int64_t>(epoch0.size()), steps * 8);
  // The next epoch is another order; a fresh sampler asked for any step repeats it bitwise.
  EXPECT_NE(w0.window_starts(steps), w0.window_starts(0));
  auto resumed = TokenWindows::create(data.train(), r1).value_or_throw();
  for (int64_t s : {steps + 3, int64_t{2}, 3 * steps + 1}) {
    EXPECT_EQ(resumed.window_starts(s), w1.window_starts(s));
    EXPECT_TRUE(torch::equal(resumed.batch(s).inputs, w1.batch(s).inputs));
  }
  // Another seed, another order.
  WindowOptions other = r1;
  other.seed = 12;
  EXPECT_NE(TokenWindows::create(data.train(), other).value_or_throw().window_starts(0),
            w1.window_starts(0));
}

TEST(TokenWindows, ValidationSplitsEvenlyAcrossRanks) {
  auto dir = write_counting(temp_dir("tok_val") / "d", 1000, 1000, 1000);
  auto data = TokenData::open(dir).value_or_throw();
  // 1000 tokens, T = 16: 62 windows; 3 ranks get 20 each, in batches of 8, 8, 4.
  std::set<int64_t> seen;
  for (int rank = 0; rank < 3; ++rank) {
    auto v = ValWindows::create(data.val(),
                                {.seq_len = 16, .batch_size = 8, .rank = rank, .world_size = 3})
                 .value_or_throw();
    EXPECT_EQ(v.batches(), 3);
    EXPECT_EQ(v.windows_per_rank(), 20);
    EXPECT_EQ(v.batch(2).inputs.size(0), 4);
    for (int64_t i = 0; i < v.batches(); ++i) {
      auto b = v.batch(i);
      for (int64_t j = 0; j < b.inputs.size(0); ++j)
        EXPECT_TRUE(seen.insert(b.inputs[j][0].item<int64_t>()).second);
    }
  }
  EXPECT_EQ(seen.size(), 60u);
  auto capped =
      ValWindows::create(data.val(), {.seq_len = 16, .batch_size = 8}, 2).value_or_throw();
  EXPECT_EQ(capped.batches(), 2);
}

TEST(TokenWindows, FileShorterThanOneWindowOrOneBatchIsRejected) {
  auto dir = write_counting(temp_dir("tok_short") / "d", 100, 50, 256);
  auto data = TokenData::open(dir).value_or_throw();
  auto r = TokenWindows::create(data.train(), {.seq_len = 100, .batch_size = 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("fewer than one window"), std::string::npos);
  EXPECT_FALSE(data.check_seq_len(100).ok());
  EXPECT_FALSE(data.check_seq_len(60).ok());  // val (50 tokens) is too short
  EXPECT_TRUE(data.check_seq_len(49).ok());
  r = TokenWindows::create(data.train(), {.seq_len = 10, .batch_size = 8, .world_size = 2});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("global batch"), std::string::npos);
  EXPECT_FALSE(
      ValWindows::create(data.val(), {.seq_len = 30, .batch_size = 1, .world_size = 2}).ok());
}

TEST(Tokenizer, BytesRoundTripAnyText) {
  auto tok = open_tokenizer("bytes").value_or_throw();
  EXPECT_EQ(tok->vocab_size(), 256);
  const std::string text = "Zürich, 東京 and \t tabs\n\nend";
  auto ids = tok->encode(text);
  EXPECT_EQ(ids.size(), text.size());
  EXPECT_EQ(ids[1], 0xC3);
  EXPECT_EQ(tok->decode(ids).value_or_throw(), text);
  EXPECT_FALSE(tok->decode({256}).ok());
  EXPECT_EQ(open_tokenizer("/nonexistent/tokenizer.model").error().code,
            sentencepiece_available() ? Code::kNotFound : Code::kUnsupported);
}

// Debian's fortunes: the bundled real English corpus (scripts/make-llm-data.sh).
const fs::path kFortunesDir = "/usr/share/games/fortunes";

TEST(TokenizeCorpus, FortunesInBytesModeKeepsEveryByte) {
  if (!fs::exists(kFortunesDir / "literature"))
    GTEST_SKIP() << "Debian package fortunes not installed";
  auto root = temp_dir("tok_corpus");
  const std::vector<fs::path> inputs{kFortunesDir / "literature", kFortunesDir / "science"};
  const auto text = read_file(inputs[0]).value_or_throw() + read_file(inputs[1]).value_or_throw();
  auto meta = tokenize_corpus({.inputs = inputs, .out_dir = root / "d", .val_fraction = 0.1}, {})
                  .value_or_throw();
  EXPECT_EQ(meta.train.tokens + meta.val.tokens, static_cast<int64_t>(text.size()));
  EXPECT_EQ(meta.train.text_bytes, meta.train.tokens);
  // Every tenth block of whole lines (>= 4,096 bytes) goes to val: 184 KB is about 45 blocks, so
  // 4 of them (a file's last block is short), 0.09 to 0.11 of the bytes (measured 0.0898); 0.02
  // is one block either way. The exact split is checked by the splice below.
  EXPECT_NEAR(static_cast<double>(meta.val.tokens) / static_cast<double>(text.size()), 0.1, 0.02);
  // Train and val interleave by block: splicing them back by the same rule gives the text.
  auto data = TokenData::open(root / "d").value_or_throw();
  std::vector<int64_t> train(static_cast<size_t>(data.train().size()));
  data.train().read(0, data.train().size(), train.data());
  std::string joined;
  for (int64_t v : train) joined += static_cast<char>(v);
  EXPECT_NE(text.find(joined.substr(0, 4000)), std::string::npos);
  EXPECT_EQ(data.tokenizer_spec(), "bytes");
  fs::remove_all(root);
}

TEST(TokenizeCorpus, BadInputsWriteNothing) {
  auto root = temp_dir("tok_badin");
  auto r = tokenize_corpus({.inputs = {root / "missing.txt"}, .out_dir = root / "d"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kNotFound);
  // A JSONL line without "text", after good ones: partial output is removed.
  {
    std::ofstream f(root / "c.jsonl");
    for (int i = 0; i < 50; ++i) f << R"({"text": "a good line of text number )" << i << "\"}\n";
    f << R"({"title": "no text"})"
      << "\n";
  }
  r = tokenize_corpus(
      {.inputs = {root / "c.jsonl"}, .out_dir = root / "d", .val_fraction = 0.1, .block_bytes = 16},
      {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("c.jsonl:51"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(root / "d"));
  // Too little text for a validation split.
  { std::ofstream(root / "tiny.txt") << "one line\n"; }
  r = tokenize_corpus({.inputs = {root / "tiny.txt"}, .out_dir = root / "d"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(fs::exists(root / "d"));
  EXPECT_FALSE(tokenize_corpus(
                   {.inputs = {root / "tiny.txt"}, .out_dir = root / "d", .val_fraction = 1.5}, {})
                   .ok());
  fs::remove_all(root);
}

TEST(TokenizeCorpus, JsonlDocumentsAreSeparatedByEos) {
  auto root = temp_dir("tok_jsonl");
  {
    std::ofstream f(root / "c.jsonl");
    f << R"({"text": "first"})"
      << "\n\n"
      << R"({"text": "second", "id": 2})"
      << "\n";
  }
  auto meta =
      tokenize_corpus({.inputs = {root / "c.jsonl"}, .out_dir = root / "d", .val_fraction = 0}, {})
          .value_or_throw();
  EXPECT_EQ(meta.train.tokens, 11);  // bytes mode has no EOS id
  EXPECT_EQ(meta.val.tokens, 0);
  fs::remove_all(root);
}

TEST(SentencePiece, TrainsBpeOnRealTextAndRoundTrips) {
  if (!sentencepiece_available())  // not built in, or an ASan build: opening one says which
    GTEST_SKIP() << open_tokenizer("any.model").error().message;
  if (!fs::exists(kFortunesDir / "literature"))
    GTEST_SKIP() << "Debian package fortunes not installed";
  auto root = temp_dir("tok_sp");
  TokenizerTrainOptions o;
  o.inputs = {kFortunesDir / "literature", kFortunesDir / "love"};
  o.vocab_size = 600;
  o.out_dir = root / "tok";
  auto model = train_sentencepiece(o).value_or_throw();
  EXPECT_TRUE(fs::exists(root / "tok" / "tokenizer.vocab"));
  auto tok = open_tokenizer(model.string()).value_or_throw();
  EXPECT_EQ(tok->vocab_size(), 600);
  EXPECT_EQ(tok->eos_id(), 2);
  // Whitespace and text outside the training set (byte fallback) come back exactly.
  const std::string text = "  A horse!  A horse!\n\tMy kingdom — für ein Pferd 馬\n\n";
  auto ids = tok->encode(text);
  EXPECT_LT(ids.size(), text.size());
  EXPECT_EQ(tok->decode(ids).value_or_throw(), text);
  // Tokenizing with it: fewer tokens than bytes, the model travels with the data.
  auto meta = tokenize_corpus({.inputs = o.inputs,
                               .tokenizer = model.string(),
                               .out_dir = root / "d",
                               .val_fraction = 0.1},
                              {})
                  .value_or_throw();
  EXPECT_GT(meta.bytes_per_token(), 1.5);  // 1.97 with these 600 pieces
  auto data = TokenData::open(root / "d").value_or_throw();
  EXPECT_EQ(data.meta().tokenizer, "sentencepiece");
  auto again = open_tokenizer(data.tokenizer_spec()).value_or_throw();
  EXPECT_EQ(again->encode(text), ids);
  // Bad options and a file that is not a model.
  o.vocab_size = 100;
  EXPECT_EQ(train_sentencepiece(o).error().code, Code::kInvalidArgument);
  ASSERT_TRUE(write_file_atomic(root / "bad.model", "not a model").ok());
  EXPECT_EQ(open_tokenizer((root / "bad.model").string()).error().code, Code::kDataError);
  fs::remove_all(root);
}

TEST(TokenCli, TokenizeAndEncodeThroughTheBinary) {
  if (!fs::exists(GPULAB_BINARY)) GTEST_SKIP() << "gpulab binary not built";
  auto root = temp_dir("tok_cli");
  auto r = testing::run_gpulab({"tokenizer", "encode", "--tokenizer", "bytes", "--text", "hi!"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "104 105 33\n");
  r = testing::run_gpulab({"data", "tokenize", "--input", (root / "missing.txt").string(), "--out",
                           (root / "d").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("error: no such input file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root / "d"));
  {
    std::ofstream f(root / "t.txt");
    for (int i = 0; i < 400; ++i) f << "line " << i << " of a small text file\n";
  }
  r = testing::run_gpulab({"data", "tokenize", "--input", (root / "t.txt").string(), "--out",
                           (root / "d").string(), "--val_fraction", "0.2", "--block_bytes", "256"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("train: "), std::string::npos) << r.out;
  EXPECT_TRUE(TokenData::open(root / "d").ok());
  // Again without --overwrite: refused, data intact.
  r = testing::run_gpulab(
      {"data", "tokenize", "--input", (root / "t.txt").string(), "--out", (root / "d").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--overwrite"), std::string::npos) << r.err;
  EXPECT_TRUE(TokenData::open(root / "d").ok());
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpulab::train
