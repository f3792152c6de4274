// One suite over every language-model family (lm_family_rows.h: each family's tiny shape, tied
// and untied): built small, it has the parameters its shape counts and Hugging Face's tensor
// names, forwards tokens to finite logits, decodes with a KV cache as the full forward pass does,
// and gives the same gradients with activation checkpointing. The round trip through
// transformers is the same rows' HfRoundTripFamily (hf_roundtrip_test.cpp).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "train/lm_family_rows.h"
#include "train/models/layers.h"
#include "train/models/lm_families.h"

namespace gpulab::train {
namespace {

constexpr int64_t kVocab = 97;

class LmFamily : public ::testing::TestWithParam<std::pair<std::string, std::string>> {
 protected:
  // The row's tiny shape with a small vocabulary, tied or not.
  DecoderConfig shape(bool tied) const {
    auto c = find_decoder_config(GetParam().second);
    EXPECT_TRUE(c.ok()) << "family " << GetParam().first << " has no -tiny shape";
    DecoderConfig out = c.ok() ? *c : DecoderConfig{};
    out.vocab_size = kVocab;
    out.tie_word_embeddings = tied;
    return out;
  }

  // Built with seed `seed`, every vector (norm scales, biases) moved off its initial value so
  // that the paths compared below must apply them.
  static CausalLmPtr build(const DecoderConfig& c, uint64_t seed) {
    torch::manual_seed(seed);
    auto m = build_causal_lm(c);
    torch::NoGradGuard no_grad;
    for (auto& p : m->parameters())
      if (p.dim() == 1) p.add_(torch::randn_like(p) * 0.3);
    return m;
  }
};

TEST_P(LmFamily, TinyCountsItsShapeAndForwards) {
  for (bool tied : {true, false}) {
    const DecoderConfig c = shape(tied);
    auto m = build(c, 0);
    EXPECT_EQ(count_parameters(*m), c.num_parameters()) << c.name << " tied " << tied;
    const auto names = m->named_parameters().keys();
    EXPECT_EQ(names.front(), c.traits().token_embedding) << "Hugging Face's first tensor";
    torch::NoGradGuard no_grad;
    m->eval();
    const auto logits = m->forward(torch::randint(0, kVocab, {2, 12}));
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 12, kVocab}));
    EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
  }
}

// A prompt, then one token at a time through the cache: the full pass's logits at each position.
// 1e-5: float32 rounding of the same sums in another order (logits of order 1; measured up to
// 7.5e-7, so 13x). A cache entry at the wrong position is off by O(0.1). Reserves: none (each step
// concatenates), the whole length (each step writes in place: the buffer never moves), and too
// short (the buffer is copied into a longer one once, mid-way).
TEST_P(LmFamily, KvCachedDecodingMatchesTheFullForwardPass) {
  for (bool tied : {true, false}) {
    for (int64_t reserve : {0, 12, 9}) {
      auto m = build(shape(tied), 1);
      m->eval();
      torch::NoGradGuard no_grad;
      auto tokens = torch::randint(0, kVocab, {2, 12});
      auto full = m->forward(tokens);  // the fused CPU kernel where it applies; the cache never
      KvCache cache;
      cache.reserve = reserve;
      const std::string where = fmt::format("tied {} reserve {}", tied, reserve);
      auto first = m->forward(tokens.narrow(1, 0, 7), &cache);
      EXPECT_TRUE(torch::allclose(first, full.narrow(1, 0, 7), 1e-5, 1e-5)) << where;
      const void* buffer = cache.keys.back().data_ptr();
      int64_t moves = 0;
      for (int64_t i = 7; i < 12; ++i) {
        auto step = m->forward(tokens.narrow(1, i, 1), &cache);
        EXPECT_TRUE(torch::allclose(step, full.narrow(1, i, 1), 1e-5, 1e-5))
            << where << " position " << i;
        moves += cache.keys.back().data_ptr() != buffer ? 1 : 0;
        buffer = cache.keys.back().data_ptr();
      }
      EXPECT_EQ(cache.length, 12);
      EXPECT_EQ(cache.keys.back().size(2), 12);
      EXPECT_EQ(moves, reserve == 0 ? 5 : reserve == 12 ? 0 : 1) << where;
    }
  }
}

// GRPO's row operations on the cache: each prompt's rows repeated for its group, finished rows
// dropped. Each row's logits stay those of a full forward pass over the tokens it saw (1e-5 as
// above), and the steps after each operation write into the buffer it made (the operation copied
// the cache once, into a buffer with the reserve's room).
TEST_P(LmFamily, RowOperationsKeepEachRowsTokensAndRoomToWriteInPlace) {
  auto m = build(shape(false), 1);
  m->eval();
  torch::NoGradGuard no_grad;
  const auto prompts = torch::randint(0, kVocab, {2, 5});
  const auto next = torch::randint(0, kVocab, {4, 4});  // row r's token at each decode step
  KvCache cache;
  cache.reserve = 12;
  m->forward(prompts, &cache);
  repeat_rows(cache, 2);  // rows 0-1 continue prompt 0, rows 2-3 prompt 1
  std::vector<torch::Tensor> seen;
  for (int64_t r = 0; r < 4; ++r) seen.push_back(prompts[r / 2]);
  std::vector<int64_t> rows{0, 1, 2, 3};
  const void* buffer = cache.keys.back().data_ptr();
  for (int64_t step = 0; step < 4; ++step) {
    if (step == 2) {  // rows 1 and 2 finish: rows 3 and 0 go on, in that order
      rows = {3, 0};
      keep_rows(cache, torch::tensor(rows, torch::kLong));
      buffer = cache.keys.back().data_ptr();
    }
    std::vector<torch::Tensor> tokens;
    for (int64_t r : rows) {
      tokens.push_back(next[r].narrow(0, step, 1));
      seen[static_cast<size_t>(r)] = torch::cat({seen[static_cast<size_t>(r)], tokens.back()});
    }
    const auto step_logits = m->forward(torch::stack(tokens), &cache);
    EXPECT_EQ(cache.keys.back().data_ptr(), buffer) << "step " << step << " moved the cache";
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto full = m->forward(seen[static_cast<size_t>(rows[i])].unsqueeze(0));
      EXPECT_TRUE(torch::allclose(step_logits[static_cast<int64_t>(i)][0], full[0][-1], 1e-5, 1e-5))
          << "step " << step << " row " << rows[i];
    }
  }
  EXPECT_EQ(cache.length, 9);
}

// Recomputing each block in the backward pass changes no gradient beyond float32 rounding (the
// recomputed forward is the same arithmetic: measured bitwise equal; the tolerance is float32's
// few ulp in case a thread split differs). A block left out of the recomputation's graph loses
// its gradient entirely.
TEST_P(LmFamily, ActivationCheckpointingGivesTheSameGradients) {
  const DecoderConfig c = shape(false);
  auto a = build(c, 2), b = build(c, 2);
  b->set_activation_checkpointing(true);
  auto tokens = torch::randint(0, kVocab, {2, 16});
  a->forward(tokens).pow(2).mean().backward();
  b->forward(tokens).pow(2).mean().backward();
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    ASSERT_TRUE(pb[i].value().grad().defined()) << pb[i].key();
    EXPECT_TRUE(torch::allclose(pa[i].value().grad(), pb[i].value().grad(), 1e-5, 1e-6))
        << pa[i].key();
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, LmFamily, ::testing::ValuesIn(testing::family_rows()),
                         testing::family_row_name);

// The rows are every family the table has, each with its tiny shape.
TEST(LmFamilyRows, EveryFamilyHasATinyShape) {
  const auto rows = testing::family_rows();
  for (const char* family : {"llama", "qwen2", "gpt2"}) {
    const auto it =
        std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return r.first == family; });
    EXPECT_NE(it, rows.end()) << family;
  }
  for (const auto& [family, tiny] : rows) EXPECT_FALSE(tiny.empty()) << family << " has no -tiny";
}

}  // namespace
}  // namespace gpulab::train
