// Corpora that are not UTF-8 text (issue 43's bad input): Latin-1, UTF-16 with its byte-order
// mark, NUL bytes, in a plain file or a JSONL "text", stop `data tokenize` with the file and line,
// a hint to convert, exit 2 and nothing written. A UTF-8 byte-order mark is skipped.
#include <gtest/gtest.h>

#include "core/files.h"
#include "train/data/text_source.h"
#include "train/data/tokenize_corpus.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

using testing::temp_dir;

TEST(TextEncoding, NotUtf8IsNamedWithAHintAndWritesNothing) {
  auto root = temp_dir("text_enc");
  std::string good;
  for (int i = 0; i < 100; ++i) good += "a line of good text " + std::to_string(i) + "\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"latin1.txt", good + "caf\xE9 cr\xE8me\n" + good},
      {"utf16le.txt", std::string("\xFF\xFE", 2) + std::string("h\0i\0\n\0", 6)},
      {"utf16be.txt", std::string("\xFE\xFF", 2) + std::string("\0h\0i\0\n", 6)},
      {"nul.txt", good + std::string("nul\0byte\n", 9)},
      {"overlong.txt", "\xC0\xAF\n"},
      {"surrogate.txt", "\xED\xA0\x80\n"},
      {"cut.txt", good + "\xE2\x82"},
      {"latin1.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"caf\xE9\"}\n"},
      {"nul.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"nul \\u0000 here\"}\n"},
  };
  for (const auto& [name, bytes] : bad) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(write_file_atomic(root / name, bytes).ok());
    auto t =
        tokenize_corpus({.inputs = {root / name}, .out_dir = root / "d", .block_bytes = 64}, {});
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.error().code, Code::kDataError);
    EXPECT_NE(t.error().message.find(name), std::string::npos) << t.error().message;
    EXPECT_NE(t.error().hint.find("iconv"), std::string::npos) << t.error().hint;
    EXPECT_FALSE(fs::exists(root / "d"));
  }
  const auto latin1 = tokenize_corpus({.inputs = {root / "latin1.txt"}, .out_dir = root / "d"}, {});
  EXPECT_NE(latin1.error().message.find("latin1.txt:101: byte 0xE9 at column 4 is not UTF-8"),
            std::string::npos)
      << latin1.error().message;
  // Valid UTF-8 of every length passes; a UTF-8 byte-order mark is neither an error nor text.
  EXPECT_FALSE(check_utf8_text("a \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80", "x").has_value());
  ASSERT_TRUE(write_file_atomic(root / "bom.txt", "\xEF\xBB\xBFhi\n").ok());
  auto reader = TextReader::open({root / "bom.txt"}).value_or_throw();
  TextBlock block;
  ASSERT_TRUE(reader.next(block).value_or_throw());
  EXPECT_EQ(block.text, "hi\n");
  fs::remove_all(root);
}

TEST(TextEncoding, DataTokenizeExitsTwoAndKeepsAnExistingFolder) {
  if (!fs::exists(GPULAB_BINARY)) GTEST_SKIP() << "gpulab binary not built";
  auto root = temp_dir("text_enc_cli");
  std::string good;
  for (int i = 0; i < 400; ++i) good += "line " + std::to_string(i) + " of a small text file\n";
  ASSERT_TRUE(write_file_atomic(root / "good.txt", good).ok());
  ASSERT_TRUE(write_file_atomic(root / "nul.txt", good + std::string("x\0y\n", 4)).ok());
  auto r = testing::run_gpulab(
      {"data", "tokenize", "--input", (root / "nul.txt").string(), "--out", (root / "d").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("nul.txt:401: a NUL byte"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hint: "), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(root / "d"));
  // Over a folder made before, with --overwrite: the old data stays whole.
  ASSERT_EQ(
      testing::run_gpulab({"data", "tokenize", "--input", (root / "good.txt").string(), "--out",
                           (root / "d").string(), "--val_fraction", "0.2", "--block_bytes", "256"})
          .exit_code,
      0);
  const auto before = read_file(root / "d" / "train.bin").value_or_throw();
  r = testing::run_gpulab({"data", "tokenize", "--input", (root / "nul.txt").string(), "--out",
                           (root / "d").string(), "--overwrite"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(read_file(root / "d" / "train.bin").value_or_throw(), before);
  EXPECT_FALSE(fs::exists(root / "d" / "train.bin.partial"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace gpulab::train
