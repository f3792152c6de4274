// A language model's optimization defaults (train/model_defaults.h): AdamW, cosine with warm-up,
// clipping and weight decay where the user passed no flag, the user's flags kept, image models
// untouched; AdamW's groups leave llama's norms and token table undecayed; and `gpulab train`
// names the defaults it applied in its header.
#include <gtest/gtest.h>

#include <algorithm>

#include "train/model_defaults.h"
#include "train/models/llama/llama.h"
#include "train/optim/optimizers.h"
#include "train/trainer_test_util.h"

namespace gpulab::train {
namespace {

TEST(ModelDefaults, LanguageModelGetsAdamWCosineWarmupClipDecay) {
  TrainOptions o;
  o.model = "llama-tiny";
  o.num_epochs = 20;
  apply_model_defaults(o, {});
  EXPECT_EQ(o.optimizer, "adamw");
  EXPECT_DOUBLE_EQ(o.learning_rate, 3e-3);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.1);
  EXPECT_EQ(o.lr_schedule, "cosine");
  EXPECT_DOUBLE_EQ(o.warmup_epochs, 1.0);  // 5 % of 20 epochs
  EXPECT_DOUBLE_EQ(o.clip_grad, 1.0);
  EXPECT_EQ(o.model_defaults.size(), 6u);
  EXPECT_TRUE(validate(o).ok());
}

TEST(ModelDefaults, PassedFlagsAreKept) {
  TrainOptions o;
  o.model = "llama-tiny";
  o.optimizer = "sgd";
  o.learning_rate = 0.02;
  o.clip_grad = 0;
  apply_model_defaults(o, {"optimizer", "learning_rate", "clip_grad"});
  EXPECT_EQ(o.optimizer, "sgd");
  EXPECT_DOUBLE_EQ(o.learning_rate, 0.02);
  EXPECT_DOUBLE_EQ(o.clip_grad, 0);
  EXPECT_EQ(o.lr_schedule, "cosine");  // not passed: the language-model default
  EXPECT_EQ(o.model_defaults.size(), 3u);
  for (const auto& d : o.model_defaults) EXPECT_EQ(d.find("learning_rate"), std::string::npos);
}

TEST(ModelDefaults, ImageModelsKeepTheSeedsDefaults) {
  TrainOptions o;
  o.model = "resnet18";
  apply_model_defaults(o, {});
  const TrainOptions seed;
  EXPECT_EQ(o.optimizer, seed.optimizer);
  EXPECT_DOUBLE_EQ(o.learning_rate, seed.learning_rate);
  EXPECT_EQ(o.lr_schedule, seed.lr_schedule);
  EXPECT_DOUBLE_EQ(o.clip_grad, seed.clip_grad);
  EXPECT_TRUE(o.model_defaults.empty());
}

TEST(ModelDefaults, LearningRateFallsWithWidth) {
  for (auto [model, lr] : {std::pair{"llama-tiny", 3e-3}, std::pair{"llama-125m", 6e-4},
                           std::pair{"llama-1b", 3e-4}, std::pair{"llama3-70b", 3e-4}}) {
    TrainOptions o;
    o.model = model;
    apply_model_defaults(o, {});
    EXPECT_DOUBLE_EQ(o.learning_rate, lr) << model;
  }
}

// The weight decay the defaults turn on reaches only llama's matrices: RMSNorm scales and the
// token embedding sit in the no-decay group.
TEST(ModelDefaults, AdamWDecaysMatricesNotNormsOrEmbeddings) {
  DecoderConfig c = find_decoder_config("llama-tiny").value();
  c.vocab_size = 64;
  LlamaForCausalLM model(c);
  TrainOptions o;
  o.model = "llama-tiny";
  apply_model_defaults(o, {});
  auto opt = make_optimizer(optimizer_spec(o), model);
  ASSERT_EQ(opt->param_groups().size(), 2u);
  const auto& decay = opt->param_groups()[0];
  const auto& no_decay = opt->param_groups()[1];
  EXPECT_DOUBLE_EQ(static_cast<const torch::optim::AdamWOptions&>(decay.options()).weight_decay(),
                   0.1);
  EXPECT_DOUBLE_EQ(
      static_cast<const torch::optim::AdamWOptions&>(no_decay.options()).weight_decay(), 0.0);
  const auto in = [](const torch::optim::OptimizerParamGroup& g, const torch::Tensor& t) {
    return std::any_of(g.params().begin(), g.params().end(),
                       [&](const torch::Tensor& p) { return p.is_same(t); });
  };
  for (const auto& p : model.named_parameters()) {
    const bool norm = p.key().find("norm") != std::string::npos;
    const bool table = p.key().find("embed_tokens") != std::string::npos;
    EXPECT_EQ(in(no_decay, p.value()), norm || table) << p.key();
    EXPECT_EQ(in(decay, p.value()), !norm && !table) << p.key();
  }
}

// The header says which defaults the run took (one step of a tiny run).
TEST(ModelDefaults, TrainHeaderNamesTheAppliedDefaults) {
  const auto out = testing::temp_dir("lm_defaults");
  auto r = testing::run_gpulab({"train", "--model", "llama-tiny", "--dataset", "synthetic-text",
                                "--seq_len", "16", "--batch_size", "2", "--max_steps", "1",
                                "--learning_rate", "1e-3", "--device", "cpu", "--output_dir",
                                out.string(), "--no_report", "--no_checkpoints"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Using adamw optimizer with lr=0.001, weight_decay=0.1, schedule=cosine"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Language-model defaults for flags not passed: optimizer adamw, "
                       "weight_decay 0.1, lr_schedule cosine, warmup_epochs 0.5, clip_grad 1.0"),
            std::string::npos)
      << r.out;
  std::filesystem::remove_all(out);
}

}  // namespace
}  // namespace gpulab::train
