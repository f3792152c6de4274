// Parity with transformers over every language-model family (lm_family_rows.h): each family's
// "-tiny" shape, as the config.json gpulab writes for it (DecoderConfig::to_json), becomes
// transformers' own model of that model_type; gpulab reads the folder transformers saved and
// both give the same logits, loss, every gradient and greedy tokens in float64, on both
// attention paths (hf_parity.h). A family added to the shape table with a tiny shape is checked
// here with nothing added; the family-specific cases (grouped-query, Mistral's window, GPT-2's
// hub layout, float32, the negative controls) stay in llama_parity_test.cpp and gpt2_test.cpp.
#include <gtest/gtest.h>

#include "train/hf_parity.h"
#include "train/lm_family_rows.h"

namespace gpulab::train {
namespace {

using Row = std::pair<std::string, std::string>;  // family, its tiny shape

class FamilyParity : public ::testing::TestWithParam<Row> {};

// The row's shape with a small vocabulary and window (the test's sequences are short).
DecoderConfig small(DecoderConfig c) {
  c.vocab_size = 512;
  c.max_positions = 64;
  return c;
}

// The shape in transformers' terms: the family's own config.json fields, weights drawn wide
// (initializer_range 0.2) so that a wrong sign or scale anywhere shows far above rounding.
Json transformers_kwargs(const DecoderConfig& c) {
  Json j = c.to_json();
  j.erase("architectures");
  j.erase("model_type");
  j["initializer_range"] = 0.2;
  j["bos_token_id"] = 0;
  j["eos_token_id"] = 0;
  return j;
}

TEST_P(FamilyParity, TinyMatchesTransformersInFp64) {
  const auto& [family, tiny] = GetParam();
  ASSERT_FALSE(tiny.empty()) << family << " has no -tiny shape in decoder_shapes()";
  if (testing::hf_python().empty())
    GTEST_FAIL() << testing::reference_missing("torch, numpy, transformers and safetensors");
  const auto found = find_decoder_config(tiny);
  ASSERT_TRUE(found.ok()) << found.error().message;
  const auto shape = small(*found);
  const auto c = testing::compare_with_transformers(
      {std::string(shape.traits().model_type), transformers_kwargs(shape), "float64"},
      "family_" + family);
  ASSERT_TRUE(c.ran) << tiny;
  EXPECT_EQ(c.config.family, family) << "transformers' config.json read as another family";
  EXPECT_EQ(c.config.tie_word_embeddings, shape.tie_word_embeddings);
  EXPECT_EQ(c.config.num_parameters(), shape.num_parameters());
  testing::expect_hf_parity(c, tiny, true);
}

INSTANTIATE_TEST_SUITE_P(EveryFamily, FamilyParity, ::testing::ValuesIn(testing::family_rows()),
                         testing::family_row_name);

}  // namespace
}  // namespace gpulab::train
