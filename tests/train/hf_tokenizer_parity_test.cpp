// gpulab's tokenizer.json reader against Hugging Face `tokenizers` itself: for the GPT-2, Llama 3
// and Qwen2 styles (tests/parity/hf_tokenizer_reference.py trains one small byte-level BPE per
// style with that style's expression, normalizer and special tokens), the ids of a corpus of over
// 1 MB of mixed text must equal `tokenizers`' exactly, decode(encode(x)) must give x back (the
// NFC of x for Qwen2), and both encode times are printed (not asserted: a shared machine's
// timings vary); the chat formats follow the special tokens; `gpulab tokenizer encode` and
// `gpulab data tokenize` read the same files. Apart, every code point in a short text, against
// the Unicode tables of the two expression engines.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "core/files.h"
#include "core/json.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "core/utf8.h"
#include "support/temp_dir.h"
#include "train/data/chat_format.h"
#include "train/data/hf_byte_map.h"
#include "train/data/hf_regex.h"
#include "train/data/tokenizer.h"
#include "train/torchvision_python.h"

namespace gpulab::train {
namespace {

namespace fs = std::filesystem;

class HfTokenizerParity : public ::testing::Test {
 protected:
  // Trains the reference tokenizers and writes what `tokenizers` makes of the texts (one run per
  // test: ctest runs each test in a process of its own).
  void run_reference(std::vector<std::string> args) {
    const std::string py = testing::python_with("tokenizers");
    ASSERT_FALSE(py.empty()) << testing::reference_missing("tokenizers");
    args.insert(args.begin(),
                {py, std::string(GPULAB_SOURCE_DIR) + "/tests/parity/hf_tokenizer_reference.py",
                 "--out", dir_.path.string()});
    RunOptions o;
    o.timeout = std::chrono::seconds(300);
    auto r = run_process(args, o);
    ASSERT_TRUE(r.ok() && r->success())
        << "hf_tokenizer_reference.py failed: " << (r.ok() ? r->err : r.error().message);
  }
  std::string corpus(const char* name) const {
    return read_file(dir_.path / name).value_or_throw();
  }
  void check_style(const std::string& style);
  void check_special_tokens();
  void check_chat_formats();
  void check_cli();
  void check_run_folder();

  gpulab::testing::TempDir dir_{"hftok-parity"};
};

std::vector<int32_t> read_ids(const fs::path& p) {
  const std::string raw = read_file(p).value_or_throw();
  std::vector<int32_t> ids(raw.size() / 4);
  std::memcpy(ids.data(), raw.data(), ids.size() * 4);  // little-endian int32, as this machine
  return ids;
}

void HfTokenizerParity::check_style(const std::string& style) {
  const fs::path d = dir_.path / style;
  const std::string text = corpus("corpus.txt");
  ASSERT_GE(text.size(), 1'000'000U);
  auto tok = open_tokenizer(d.string()).value_or_throw();  // the folder, as a model folder
  const auto c0 = std::clock();
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->encode(text);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  const std::vector<int32_t> theirs = read_ids(d / "ids.bin");
  size_t same = 0;
  while (same < ids.size() && same < theirs.size() && ids[same] == theirs[same]) ++same;
  EXPECT_EQ(ids.size(), theirs.size());
  if (same < theirs.size()) {
    std::string around;
    for (size_t k = same > 3 ? same - 3 : 0; k < std::min(theirs.size(), same + 3); ++k)
      around += fmt::format(" [{}] ours {} '{}' theirs {} '{}';", k, k < ids.size() ? ids[k] : -1,
                            printable(tok->decode({k < ids.size() ? ids[k] : 0}).value_or("?")),
                            theirs[k], printable(tok->decode({theirs[k]}).value_or("?")));
    ADD_FAILURE() << style << ": first different id at " << same << ":" << around;
  }
  const std::string want = style == "qwen2" ? corpus("corpus.nfc.txt") : text;
  EXPECT_TRUE(tok->decode(ids).value_or_throw() == want) << style << ": decode(encode(x)) != x";
  const Json hf = parse_json(read_file(d / "hf.json").value_or_throw()).value_or_throw();
  EXPECT_TRUE(hf.at("roundtrip").get<bool>()) << "the reference's own round trip failed";
  EXPECT_EQ(tok->vocab_size(), hf.at("vocab").get<int64_t>());
  const double mb = static_cast<double>(text.size()) / 1e6;
  const double hf_cpu = hf.at("cpu_seconds").get<double>();
  std::printf(
      "%s: %.2f MB -> %zu tokens, equal; encode CPU: gpulab %.3f s (%.1f MB/s), "
      "tokenizers %.3f s (%.1f MB/s): %.1fx; wall %.3f s vs %.3f s\n",
      style.c_str(), mb, ids.size(), cpu, mb / cpu, hf_cpu, mb / hf_cpu, hf_cpu / cpu, wall,
      hf.at("seconds").get<double>());
}

// Every code point of planes 0-3 in a short text (letters, digits, an apostrophe, spaces around
// it), GPT-2 style. The expressions' classes come from each engine's Unicode tables: PCRE2 10.42
// (Debian 12) has Unicode 14, `tokenizers`' Oniguruma a newer one. So a text may differ only where
// its code point is unassigned in PCRE2's tables (a letter or digit added since, which PCRE2 puts
// in [^\s\p{L}\p{N}]), or is U+180E (Mongolian vowel separator: White_Space before Unicode 6.3,
// and still \s to Oniguruma). The count of those is printed.
TEST_F(HfTokenizerParity, EveryCodePointAsTokenizersUpToUnicodeVersions) {
  run_reference({"--styles", "gpt2", "--code_points"});
  if (HasFatalFailure()) return;
  auto tok = open_tokenizer((dir_.path / "gpt2").string()).value_or_throw();
  const auto cps = read_ids(dir_.path / "cp.bin");
  const auto lengths = read_ids(dir_.path / "gpt2" / "cp_lengths.bin");
  const auto theirs = read_ids(dir_.path / "gpt2" / "cp_ids.bin");
  ASSERT_EQ(cps.size(), lengths.size());
  const auto unassigned = hf::Regex::compile("^\\p{Cn}$").value_or_throw();
  size_t at = 0, newer = 0;
  std::string wrong;
  for (size_t i = 0; i < cps.size(); ++i) {
    std::string c;
    append_utf8(c, static_cast<char32_t>(cps[i]));
    const auto ids = tok->encode("a" + c + "'s " + c + "1" + c + "  ");
    const auto n = static_cast<size_t>(lengths[i]);
    ASSERT_LE(at + n, theirs.size());
    const bool same = std::equal(ids.begin(), ids.end(), theirs.begin() + static_cast<long>(at),
                                 theirs.begin() + static_cast<long>(at + n));
    at += n;
    if (same) continue;
    if (!unassigned.find_all(c).empty() || cps[i] == 0x180E) {
      ++newer;
    } else if (wrong.size() < 400) {
      wrong += fmt::format(" U+{:04X}", cps[i]);
    }
  }
  EXPECT_EQ(at, theirs.size());
  EXPECT_TRUE(wrong.empty()) << "code points PCRE2 knows, pre-tokenized otherwise:" << wrong;
  std::printf(
      "code points: %zu of %zu as tokenizers; %zu differ, all unassigned in PCRE2's "
      "Unicode tables (or U+180E)\n",
      cps.size() - newer, cps.size(), newer);
}

void HfTokenizerParity::check_special_tokens() {
  // Llama 3: <|begin_of_text|> from the post-processor's template; the end-of-text name.
  auto llama = open_tokenizer((dir_.path / "llama3" / "tokenizer.json").string()).value_or_throw();
  EXPECT_EQ(llama->encode("<|begin_of_text|>"),
            std::vector<int32_t>{static_cast<int32_t>(llama->bos_id())});
  EXPECT_EQ(llama->encode("<|end_of_text|>"),
            std::vector<int32_t>{static_cast<int32_t>(llama->eos_id())});
  auto qwen = open_tokenizer((dir_.path / "qwen2").string()).value_or_throw();
  EXPECT_EQ(qwen->bos_id(), -1);  // Qwen2 has none
  // What `tokenizers` encodes with add_special_tokens: bos first where gpulab prepends it.
  for (const char* style : {"gpt2", "llama3", "qwen2"}) {
    auto tok = open_tokenizer((dir_.path / style).string()).value_or_throw();
    std::vector<int32_t> ids;
    if (tok->prepends_bos()) ids.push_back(static_cast<int32_t>(tok->bos_id()));
    for (int32_t id : tok->encode("Hello, world! 42")) ids.push_back(id);
    EXPECT_EQ(ids, read_ids(dir_.path / style / "with_specials.bin")) << style;
  }
  EXPECT_TRUE(llama->prepends_bos());
  EXPECT_EQ(qwen->encode("<|endoftext|>"),
            std::vector<int32_t>{static_cast<int32_t>(qwen->eos_id())});
}

void HfTokenizerParity::check_chat_formats() {
  auto qwen = open_tokenizer((dir_.path / "qwen2").string()).value_or_throw();
  auto llama = open_tokenizer((dir_.path / "llama3").string()).value_or_throw();
  auto gpt2 = open_tokenizer((dir_.path / "gpt2").string()).value_or_throw();
  EXPECT_EQ(detect_chat_format(*qwen).value_or_throw(), ChatFormat::kChatMl);
  EXPECT_EQ(detect_chat_format(*llama).value_or_throw(), ChatFormat::kLlama3);
  EXPECT_EQ(detect_chat_format(*gpt2).error().code, Code::kUnsupported);
  // The rendered prompt's special tokens encode as single ids.
  const auto ids = qwen->encode(render_chat(ChatFormat::kChatMl, {{"user", "hi"}}, true));
  const auto start = qwen->encode("<|im_start|>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), start.at(0)), 2);
}

// `gpulab data tokenize` and `gpulab tokenizer encode` read the same files.
void HfTokenizerParity::check_cli() {
  ASSERT_TRUE(fs::exists(GPULAB_BINARY)) << "gpulab binary not built";
  const fs::path input = dir_.path / "small.txt";
  const std::string text = "Héllo wörld 12345 <|im_start|>user\n中文 😀\n";
  write_file_atomic(input, text).value_or_throw();
  const fs::path out = dir_.path / "tokens";
  auto made =
      run_process({GPULAB_BINARY, "data", "tokenize", "--input", input.string(), "--tokenizer",
                   (dir_.path / "qwen2").string(), "--out", out.string(), "--val_fraction", "0"});
  ASSERT_TRUE(made.ok() && made->success()) << (made.ok() ? made->err : made.error().message);
  EXPECT_NE(made->out.find("tokenizer: hf-bpe"), std::string::npos) << made->out;
  // The folder's copy of tokenizer.json encodes as the original does.
  auto enc = run_process({GPULAB_BINARY, "tokenizer", "encode", "--tokenizer",
                          (out / "tokenizer.json").string(), "--text", text});
  ASSERT_TRUE(enc.ok() && enc->success()) << (enc.ok() ? enc->err : enc.error().message);
  auto tok = open_tokenizer((dir_.path / "qwen2").string()).value_or_throw();
  std::string want;
  for (int32_t id : tok->encode(text)) want += (want.empty() ? "" : " ") + std::to_string(id);
  EXPECT_EQ(enc->out, want + "\n");
}

// A language model trained on tokenizer.json tokens: its run folder keeps the tokenizer.json (what
// transformers and `gpulab generate --model RUN` read), and generation from the run works. 4000
// lines (about 120 KB): a validation split of the default share needs 20 blocks of 4 KB.
void HfTokenizerParity::check_run_folder() {
  const fs::path input = dir_.path / "run-corpus.txt";
  std::string text;
  for (int i = 0; i < 4000; ++i) text += "Héllo wörld " + std::to_string(i) + " 中文 😀\n";
  write_file_atomic(input, text).value_or_throw();
  const fs::path tokens = dir_.path / "run-tokens", run = dir_.path / "run";
  auto made =
      run_process({GPULAB_BINARY, "data", "tokenize", "--input", input.string(), "--tokenizer",
                   (dir_.path / "qwen2").string(), "--out", tokens.string()});
  ASSERT_TRUE(made.ok() && made->success()) << (made.ok() ? made->err : made.error().message);
  auto trained = run_process({GPULAB_BINARY, "train", "--model", "llama-tiny", "--dataset", "text",
                              "--data_dir", tokens.string(), "--seq_len", "16", "--batch_size", "2",
                              "--num_epochs", "1", "--limit_train_batches", "1", "--no_report",
                              "--output_dir", run.string()});
  ASSERT_TRUE(trained.ok() && trained->success())
      << (trained.ok() ? trained->err : trained.error().message);
  EXPECT_TRUE(fs::exists(run / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(run / "tokenizer_config.json"));
  auto gen = run_process({GPULAB_BINARY, "generate", "--model", run.string(), "--prompt", "Héllo",
                          "--max_new_tokens", "3", "--temperature", "0"});
  ASSERT_TRUE(gen.ok() && gen->success()) << (gen.ok() ? gen->err : gen.error().message);
  EXPECT_EQ(gen->out.rfind("Héllo", 0), 0u) << gen->out;
}

TEST_F(HfTokenizerParity, ThreeStylesEqualTokenizersOnMixedText) {
  run_reference({});
  if (HasFatalFailure()) return;
  for (const char* style : {"gpt2", "llama3", "qwen2"}) check_style(style);
  // The hub's older GPT-2 layout ("a b" merges, a normalized <|endoftext|>): the same ids.
  auto legacy = open_tokenizer((dir_.path / "gpt2_legacy").string()).value_or_throw();
  EXPECT_TRUE(legacy->encode(corpus("corpus.txt")) == read_ids(dir_.path / "gpt2" / "ids.bin"));
  check_special_tokens();
  check_chat_formats();
  check_cli();
  check_run_folder();
}

}  // namespace
}  // namespace gpulab::train
