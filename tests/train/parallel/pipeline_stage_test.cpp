// A pipeline stage in one process: it materialises only its own pieces (the rest stay on the
// meta device), under the ordinary names, so the stages' state dicts gather back to the whole
// model's; chained, the stages compute the whole model's logits; weights that lack a stage's
// tensor are refused by name.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "train/models/lm_families.h"
#include "train/parallel/pipeline_stage.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;

namespace {

DecoderConfig three_blocks(const std::string& family, bool tied) {
  DecoderConfig c;
  c.name = family + "-stage-tiny";
  c.family = family;
  c.vocab_size = 37;
  c.hidden_size = 32;
  c.intermediate_size = family == "gpt2" ? 128 : 48;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = family == "gpt2" ? 4 : 2;
  c.max_positions = 16;
  c.tie_word_embeddings = tied;
  return c;
}

class PipelineStageParts : public ::testing::TestWithParam<std::pair<std::string, bool>> {};

TEST_P(PipelineStageParts, StagesHoldTheirPiecesAndChainToTheWholeModel) {
  const auto [family, tied] = GetParam();
  const DecoderConfig c = three_blocks(family, tied);
  torch::manual_seed(5);
  auto whole = build_causal_lm(c);
  whole->to(torch::kDouble);
  const StateDict full = module_state_dict(*whole);
  const PipelineShape shape{3, 1, 1};
  const auto spans = split_stages(3, 3, 1, StageCosts{});  // one block each
  std::vector<std::unique_ptr<PipelineStage>> stages;
  std::vector<StateDict> dicts;
  int64_t bytes = 0;
  for (int s = 0; s < 3; ++s) {
    stages.push_back(std::make_unique<PipelineStage>(c, shape, spans, s, full));
    dicts.push_back(stages.back()->state_dict());
    bytes += stages.back()->parameter_bytes();
    for (const auto& [name, t] : dicts.back()) EXPECT_EQ(t.scalar_type(), torch::kDouble) << name;
  }
  // The middle stage holds one block and nothing else; a tied weight is on the first and last.
  for (const auto& [name, t] : dicts[1])
    EXPECT_NE(name.find(family == "gpt2" ? ".h.1." : ".layers.1."), std::string::npos) << name;
  EXPECT_EQ(stages[0]->shared_weight().empty(), !tied);
  EXPECT_EQ(stages[1]->shared_weight(), "");
  const StateDict back = gather_pipeline_state(dicts);
  ASSERT_EQ(back.size(), full.size());
  for (const auto& [name, t] : full) EXPECT_TRUE(torch::equal(back.at(name), t)) << name;
  int64_t whole_bytes = 0;
  for (const auto& [name, t] : full) whole_bytes += t.numel() * 8;
  const int64_t tied_bytes = tied ? c.vocab_size * c.hidden_size * 8 : 0;
  EXPECT_EQ(bytes, whole_bytes + tied_bytes);  // the tied weight is held twice
  // Chained, the stages give the whole model's logits, bit for bit (the same operations).
  const auto tokens = torch::randint(c.vocab_size, {2, 5});
  torch::Tensor h = tokens;
  for (int s = 0; s < 3; ++s) h = stages[static_cast<size_t>(s)]->forward(s, h);
  EXPECT_TRUE(torch::equal(h, whole->forward(tokens)));
  // Weights without the last block's tensors are refused, naming one.
  StateDict partial = full;
  for (auto it = partial.begin(); it != partial.end();)
    it = it->first.find(family == "gpt2" ? ".h.2." : ".layers.2.") != std::string::npos
             ? partial.erase(it)
             : std::next(it);
  try {
    PipelineStage wrong(c, shape, spans, 2, partial);
    FAIL() << "a stage was built without its weights";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("pipeline stage 2"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(PipelineStage(c, shape, spans, 0, partial));  // stage 0 needs none of them
}

INSTANTIATE_TEST_SUITE_P(Families, PipelineStageParts,
                         ::testing::Values(std::make_pair(std::string("llama"), false),
                                           std::make_pair(std::string("llama"), true),
                                           std::make_pair(std::string("gpt2"), true)),
                         [](const auto& info) {
                           return info.param.first + (info.param.second ? "_tied" : "_untied");
                         });

TEST(PipelineGather, RefusesTiedCopiesThatDiffer) {
  StateDict a{{"w", torch::ones({2})}}, b{{"w", torch::zeros({2})}};
  EXPECT_THROW(gather_pipeline_state({a, b}), Exception);
  EXPECT_NO_THROW(gather_pipeline_state({a, a}));
}

}  // namespace
