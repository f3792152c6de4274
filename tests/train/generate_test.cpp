// Generation: the KV-cached, batched loop gives the argmax of a full forward pass at each step
// (greedy is what it was), stops a row at EOS or when asked, and draws the same tokens for the
// same seed; the new text is the whole sequence's decoding past the prompt's (the space after the
// prompt with a trained SentencePiece tokenizer, whole characters, stop strings); and
// `gpulab generate` streams samples with its flags.
#include <gtest/gtest.h>

#include <fstream>

#include "support/temp_dir.h"
#include "train/data/incremental_decoder.h"
#include "train/data/tokenizer.h"
#include "train/generate.h"
#include "train/models/lm_families.h"
#include "train/weights/safetensors.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

// A small random Llama (vocab 600, that of license_tokenizer).
CausalLmPtr small_lm() {
  auto c = find_decoder_config("llama-tiny").value_or_throw();
  c.vocab_size = 600;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_layers = 2;
  c.num_heads = c.num_kv_heads = 4;
  c.max_positions = 128;
  torch::manual_seed(7);
  return build_causal_lm(c);
}

// Greedy the slow way: the whole sequence through the model at every step, no cache.
std::vector<int64_t> greedy_without_cache(CausalLm& m, std::vector<int64_t> seq, int64_t n) {
  torch::NoGradGuard no_grad;
  m.eval();
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) {
    const auto logits = m.forward(torch::tensor(seq, torch::kLong).unsqueeze(0), nullptr);
    out.push_back(logits[0][-1].argmax().item<int64_t>());
    seq.push_back(out.back());
  }
  return out;
}

TEST(Generate, GreedyIsTheArgmaxOfAFullForwardAndStopsAtEos) {
  auto m = small_lm();
  const std::vector<int64_t> prompt = {5, 17, 42, 17};
  SamplingOptions o;
  o.temperature = 0;
  o.max_new_tokens = 16;
  const auto greedy = generate(*m, prompt, o);
  ASSERT_EQ(greedy, greedy_without_cache(*m, prompt, 16));
  // EOS: the row ends at the first time it is chosen, EOS kept as its last token.
  o.eos_id = greedy[5];
  const auto stop = std::find(greedy.begin(), greedy.end(), o.eos_id);
  EXPECT_EQ(generate(*m, prompt, o), std::vector<int64_t>(greedy.begin(), stop + 1));
  // Rows: three greedy rows are the single row three times; a caller can finish one early.
  o.eos_id = -1;
  TokenSampler sampler(o, 0);
  const auto rows = generate_rows(*m, prompt, 3, o, sampler, [](int64_t row, int64_t) {
    return row != 1;  // row 1 ends after its first token
  });
  EXPECT_EQ(rows[0], greedy);
  EXPECT_EQ(rows[2], greedy);
  EXPECT_EQ(rows[1], std::vector<int64_t>{greedy[0]});
}

TEST(Generate, SameSeedSameSamplesAndThePenaltyChangesGreedy) {
  auto m = small_lm();
  const std::vector<int64_t> prompt = {1, 2, 3};
  SamplingOptions o;
  o.temperature = 1;
  o.top_k = 0;
  o.top_p = 0.95;
  o.max_new_tokens = 20;
  o.seed = 9;
  const auto a = generate(*m, prompt, o), b = generate(*m, prompt, o);
  EXPECT_EQ(a, b);
  o.seed = 10;
  EXPECT_NE(generate(*m, prompt, o), a);  // 20 draws over ~600 tokens: equal by chance ~never
  // A strong penalty keeps greedy from repeating a token it has already produced.
  o.temperature = 0;
  o.repetition_penalty = 1e6;
  o.max_new_tokens = 30;
  auto seq = generate(*m, prompt, o);
  std::sort(seq.begin(), seq.end());
  EXPECT_EQ(std::adjacent_find(seq.begin(), seq.end()), seq.end());
}

// A SentencePiece model of GPL-3's text (always on Debian: base-files).
std::unique_ptr<Tokenizer> license_tokenizer(const fs::path& dir) {
  // GPL-3's 75 characters, 256 bytes and 3 special ids leave room for merges.
  TokenizerTrainOptions o{.inputs = {"/usr/share/common-licenses/GPL-3"}, .vocab_size = 600};
  o.out_dir = dir;
  o.threads = 1;
  return open_tokenizer(train_sentencepiece(o).value_or_throw().string()).value_or_throw();
}

TEST(IncrementalDecoder, SpaceAfterThePromptWholeCharactersAndStops) {
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("x.model").error().message;
  if (!fs::exists("/usr/share/common-licenses/GPL-3")) GTEST_SKIP() << "no common-licenses";
  gpulab::testing::TempDir dir("incdec");
  const auto tok = license_tokenizer(dir.path);
  const auto prompt = tok->encode("This License");
  const auto whole = tok->encode("This License applies to any program");
  ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), whole.begin()));
  const std::vector<int32_t> rest(whole.begin() + static_cast<int64_t>(prompt.size()), whole.end());
  // Decoded on their own, the new tokens lose the word boundary (issue 43's "This Licensea").
  EXPECT_EQ(tok->decode(rest).value_or_throw(), "applies to any program");
  IncrementalDecoder d(*tok, prompt);
  std::string streamed;
  for (int32_t id : rest) streamed += d.push(id);
  streamed += d.finish();
  EXPECT_EQ(streamed, " applies to any program");
  EXPECT_EQ(d.push(static_cast<int32_t>(tok->eos_id())), "");  // </s> has no text
  // A character outside the vocabulary is three byte pieces: it appears once, whole.
  const auto horse = tok->encode("This License 馬");
  IncrementalDecoder h(*tok, prompt);
  std::vector<std::string> pieces;
  for (size_t i = prompt.size(); i < horse.size(); ++i) pieces.push_back(h.push(horse[i]));
  ASSERT_GE(pieces.size(), 3u);
  EXPECT_EQ(pieces[pieces.size() - 3], "");
  EXPECT_EQ(pieces[pieces.size() - 2], "");
  EXPECT_EQ(pieces.back(), "馬");
  EXPECT_EQ(h.text(), " 馬");
  // A stop string ends the text at its end, however far the token that held it reached.
  IncrementalDecoder s(*tok, prompt, {"ppl"});
  std::string stopped;
  for (int32_t id : rest) stopped += s.push(id);
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(stopped, " appl");
  EXPECT_EQ(s.finish(), "");
}

TEST(IncrementalDecoder, BytesHoldAnIncompleteCharacter) {
  const auto tok = open_tokenizer("bytes").value_or_throw();
  IncrementalDecoder d(*tok, tok->encode("caf"));
  const auto e = tok->encode("é");  // two bytes
  EXPECT_EQ(d.push(e[0]), "");
  EXPECT_EQ(d.push(e[1]), "é");
  EXPECT_EQ(d.push(0xE9), "");  // a lead byte with nothing after it: held to the end
  EXPECT_EQ(d.finish(), "\xE9");
}

TEST(GenerateCli, SamplesStreamWithSeedsStopsAndRate) {
  if (!fs::exists(GPULAB_BINARY)) GTEST_SKIP() << "gpulab binary not built";
  if (!sentencepiece_available()) GTEST_SKIP() << open_tokenizer("x.model").error().message;
  if (!fs::exists("/usr/share/common-licenses/GPL-3")) GTEST_SKIP() << "no common-licenses";
  gpulab::testing::TempDir dir("gencli");
  license_tokenizer(dir.path / "tok");
  auto m = small_lm();
  ASSERT_TRUE(write_safetensors(dir.path / "w.safetensors", module_state_dict(*m)).ok());
  {
    std::ofstream(dir.path / "config.json") << R"({"model_type": "llama", "vocab_size": 600,
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 4, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5, "rope_theta": 10000, "tie_word_embeddings": false})";
  }
  const std::vector<std::string> args = {"generate",
                                         "--model",
                                         (dir.path / "config.json").string(),
                                         "--weights",
                                         (dir.path / "w.safetensors").string(),
                                         "--tokenizer",
                                         (dir.path / "tok" / "tokenizer.model").string(),
                                         "--prompt",
                                         "This License",
                                         "--temperature",
                                         "1",
                                         "--top_p",
                                         "0.9",
                                         "--repetition_penalty",
                                         "1.2",
                                         "--num_samples",
                                         "2",
                                         "--seed",
                                         "3",
                                         "--max_new_tokens",
                                         "20"};
  auto a = testing::run_gpulab(args), b = testing::run_gpulab(args);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  EXPECT_EQ(a.out, b.out);  // same seed, same text
  EXPECT_EQ(a.out.find("[sample 1/2]\nThis License"), 0u) << a.out;
  EXPECT_NE(a.out.find("\n[sample 2/2]\nThis License"), std::string::npos) << a.out;
  EXPECT_NE(a.err.find(" tokens/s)"), std::string::npos) << a.err;
  // Bad settings are named before any weights load.
  auto bad = args;
  *(std::find(bad.begin(), bad.end(), "--top_p") + 1) = "1.5";
  auto r = testing::run_gpulab(bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--top_p"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace gpulab::train
