// Tests of the trainer's option validation, learning-rate schedule, loss scaler and optimizer
// parameter groups, with real libtorch tensors.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "train/models/lm_families.h"
#include "train/optim/loss_scaler.h"
#include "train/optim/optimizers.h"
#include "train/optim/schedule.h"
#include "train/train_options.h"

namespace gpulab::train {
namespace {

TEST(TrainerOptions, DefaultsAreValid) {
  EXPECT_TRUE(validate(TrainOptions{}).ok());
}

TEST(TrainerOptions, BadEnumListsValidValues) {
  TrainOptions o;
  o.optimizer = "lion";
  auto s = validate(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Code::kInvalidArgument);
  EXPECT_NE(s.error().hint.find("sgd, adam, adamw, rmsprop"), std::string::npos);
  o = {};
  o.lr_schedule = "linear";
  EXPECT_NE(validate(o).error().hint.find("none, step, cosine"), std::string::npos);
  o = {};
  o.device = "gpu0";
  EXPECT_FALSE(validate(o).ok());
  o.device = "cuda:1x";
  EXPECT_FALSE(validate(o).ok());
}

TEST(TrainerOptions, RangesAreChecked) {
  auto rejected = [](void (*mutate)(TrainOptions&)) {
    TrainOptions o;
    mutate(o);
    return !validate(o).ok();
  };
  EXPECT_TRUE(rejected([](TrainOptions& o) { o.learning_rate = 0; }));
  EXPECT_TRUE(rejected([](TrainOptions& o) { o.batch_size = 0; }));
  EXPECT_TRUE(rejected([](TrainOptions& o) { o.grad_accum = 0; }));
  EXPECT_TRUE(rejected([](TrainOptions& o) { o.label_smoothing = 1.0; }));
  EXPECT_TRUE(rejected([](TrainOptions& o) { o.clip_grad = -1; }));
  EXPECT_TRUE(rejected([](TrainOptions& o) { o.num_epochs = 0; }));
  EXPECT_TRUE(rejected([](TrainOptions& o) { o.input_size = 4; }));
  EXPECT_FALSE(rejected([](TrainOptions& o) { o.label_smoothing = 0.1; }));
}

// The world-size checks hold for every model kind: a global batch of 2 split between 3
// processes leaves one with none, whether the model classifies images or predicts tokens.
TEST(TrainerOptions, ScaledBatchBelowTheWorldSizeIsRefusedForEveryModelKind) {
  TrainOptions image;
  image.model = "resnet18";
  image.dataset = "synthetic";
  image.input_size = 32;
  TrainOptions lm;
  lm.model = "llama-tiny";
  lm.dataset = "synthetic-text";
  lm.seq_len = 32;
  for (TrainOptions o : {image, lm}) {
    o.device = "cpu";
    o.batch_size = 2;
    o.batch_size_scaled = true;
    EXPECT_TRUE(check_train_options(o, 2).ok()) << o.model;
    auto s = check_train_options(o, 3);
    ASSERT_FALSE(s.ok()) << o.model << " took a global batch of 2 on 3 processes";
    EXPECT_EQ(s.error().code, Code::kInvalidArgument);
    EXPECT_NE(s.error().message.find("--batch_size 2 with --batch_size_scaled is smaller than the "
                                     "3 processes: it must be >= 3"),
              std::string::npos)
        << s.error().message;
    EXPECT_EQ(batch_per_process(o, 2), 1);
    o.batch_size_scaled = false;  // then each process takes --batch_size
    EXPECT_TRUE(check_train_options(o, 3).ok()) << o.model;
  }
}

// ZeRO over more data-parallel processes than the model has elements leaves one without a
// shard: refused with the count before any rank starts (a config.json can describe a model that
// small; the ranks' own check is the second line). Equal counts pass, and so does --shard none.
TEST(TrainerOptions, ShardOverMoreProcessesThanParametersIsRefusedBeforeAnyRank) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("gpulab-shard-world-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json")
      << R"({"model_type": "llama", "hidden_size": 2, "num_hidden_layers": 1,
             "num_attention_heads": 1, "intermediate_size": 1, "vocab_size": 4,
             "max_position_embeddings": 8, "rms_norm_eps": 1e-5, "tie_word_embeddings": true})";
  TrainOptions o;
  o.model = (dir / "config.json").string();
  o.dataset = "synthetic-text";
  o.seq_len = 8;
  o.device = "cpu";
  const int64_t params = find_decoder_config(o.model).value().num_parameters();
  ASSERT_LT(params, 100);
  const int world = static_cast<int>(params);
  EXPECT_TRUE(check_shard_world(o, "full", world).ok());
  auto s = check_shard_world(o, "full", world + 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Code::kInvalidArgument);
  EXPECT_NE(s.error().message.find("--shard full: "), std::string::npos) << s.error().message;
  EXPECT_NE(s.error().message.find(std::to_string(params) + " parameters, fewer than the " +
                                   std::to_string(world + 1) + " processes"),
            std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().hint.find("--shard none"), std::string::npos);
  EXPECT_TRUE(check_train_options(o, world + 1).ok()) << "the other checks pass";
  EXPECT_TRUE(check_shard_world(o, "none", world + 1).ok());
  std::filesystem::remove_all(dir);
}

TEST(TrainerOptions, Fp16IsRejectedOnTheCpuWithAHint) {
  TrainOptions o;
  o.device = "cpu";
  o.precision = "fp16";
  auto s = validate(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("CPU"), std::string::npos);
  EXPECT_NE(s.error().hint.find("bf16"), std::string::npos);
  o.precision = "bf16";
  EXPECT_TRUE(validate(o).ok());
  o.precision = "tf32";  // a no-op with a note on the CPU, not an error
  EXPECT_TRUE(validate(o).ok());
}

TEST(TrainerSchedule, WarmupIsLinearPerStepThenCosineToZero) {
  ScheduleSpec s;
  s.kind = "cosine";
  s.base_lr = 0.1;
  s.steps_per_epoch = 10;
  s.total_epochs = 3;
  s.warmup_epochs = 0.5;
  LrSchedule sch(s);
  ASSERT_EQ(sch.warmup_steps(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(sch.lr_at(i), 0.1 * (i + 1) / 5, 1e-12);
  EXPECT_NEAR(sch.lr_at(5), 0.1, 1e-12);  // cosine starts at the base rate
  // Step 17 is 12 of the 25 cosine steps in: base/2 * (1 + cos(pi * 12/25)).
  EXPECT_NEAR(sch.lr_at(17), 0.05 * (1 + std::cos(M_PI * 12 / 25.0)), 1e-12);
  EXPECT_LT(sch.lr_at(29), 0.001);
  for (int i = 6; i < 30; ++i) EXPECT_LE(sch.lr_at(i), sch.lr_at(i - 1));
}

TEST(TrainerSchedule, StepDecaysEveryStepSizeEpochs) {
  ScheduleSpec s;
  s.kind = "step";
  s.base_lr = 1.0;
  s.steps_per_epoch = 4;
  s.total_epochs = 10;
  s.step_size = 2;
  s.gamma = 0.5;
  LrSchedule sch(s);
  EXPECT_DOUBLE_EQ(sch.lr_at(0), 1.0);
  EXPECT_DOUBLE_EQ(sch.lr_at(7), 1.0);
  EXPECT_DOUBLE_EQ(sch.lr_at(8), 0.5);
  EXPECT_DOUBLE_EQ(sch.lr_at(16), 0.25);
  s.kind = "none";
  EXPECT_DOUBLE_EQ(LrSchedule(s).lr_at(39), 1.0);
}

TEST(TrainerLossScaler, SkipsOverflowAndBacksOff) {
  auto w = torch::ones({3}, torch::requires_grad());
  torch::optim::SGD opt({w}, torch::optim::SGDOptions(0.1));
  LossScaler scaler(true, 1024.0, 2);
  auto loss = (w * 2).sum();
  scaler.scale_loss(loss).backward();
  ASSERT_TRUE(scaler.unscale(opt));
  EXPECT_TRUE(torch::allclose(w.grad(), torch::full({3}, 2.0)));  // unscaled back to the truth
  scaler.update(false);
  scaler.update(false);
  EXPECT_DOUBLE_EQ(scaler.scale(), 2048.0);  // grows after growth_interval clean steps
  w.mutable_grad().fill_(std::numeric_limits<float>::infinity());
  EXPECT_FALSE(scaler.unscale(opt));
  scaler.update(true);
  EXPECT_DOUBLE_EQ(scaler.scale(), 1024.0);
  EXPECT_EQ(scaler.skipped_steps(), 1);
  LossScaler off(false);
  EXPECT_DOUBLE_EQ(off.scale_loss(loss).item<double>(), loss.item<double>());
}

// A conv + batch norm + linear model: conv/linear weights decay, norm and bias do not.
struct Tiny : torch::nn::Module {
  torch::nn::Conv2d conv{torch::nn::Conv2dOptions(1, 2, 3)};
  torch::nn::BatchNorm2d bn{2};
  torch::nn::Linear fc{2, 3};
  Tiny() {
    register_module("conv", conv);
    register_module("bn", bn);
    register_module("fc", fc);
  }
};

TEST(TrainerOptimizer, NormsAndBiasesGetNoWeightDecay) {
  for (const std::string name : {"sgd", "adam", "adamw", "rmsprop"}) {
    Tiny m;
    OptimizerSpec s;
    s.name = name;
    s.lr = 0.01;
    s.weight_decay = 0.05;
    auto opt = make_optimizer(s, m);
    ASSERT_EQ(opt->param_groups().size(), 2u) << name;
    EXPECT_EQ(opt->param_groups()[0].params().size(), 2u);  // conv.weight, fc.weight
    EXPECT_EQ(opt->param_groups()[1].params().size(), 4u);  // conv.bias, bn.weight/bias, fc.bias
    for (const auto& p : opt->param_groups()[0].params()) EXPECT_GE(p.dim(), 2);
    set_learning_rate(*opt, 0.5);
    EXPECT_DOUBLE_EQ(learning_rate(*opt), 0.5);
  }
}

// A language model's token and position tables are lookups, not products: they take no weight
// decay in any family (Hugging Face's names for them: Llama's and Qwen2's embed_tokens, GPT-2's
// wte and wpe); every other matrix does. The optimizer once matched "embed_tokens", so GPT-2's
// wte decayed, and later named only the token table, so its wpe did.
TEST(TrainerOptimizer, EveryFamilysEmbeddingTablesGetNoWeightDecay) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> families = {
      {"llama-tiny", {"model.embed_tokens.weight"}},
      {"qwen2-tiny", {"model.embed_tokens.weight"}},
      {"gpt2-tiny", {"transformer.wte.weight", "transformer.wpe.weight"}}};
  for (const auto& [shape, tables] : families) {
    auto model = build_causal_lm(find_decoder_config(shape).value_or_throw());
    OptimizerSpec s;
    s.name = "adamw";
    s.weight_decay = 0.1;
    auto opt = make_optimizer(s, *model);
    const auto params = model->named_parameters();
    const auto in_group = [&](size_t g, const torch::Tensor& t) {
      const auto& ps = opt->param_groups()[g].params();
      return std::any_of(ps.begin(), ps.end(), [&](const auto& p) { return p.is_same(t); });
    };
    for (const auto& table : tables) {
      const torch::Tensor* embed = params.find(table);
      ASSERT_NE(embed, nullptr) << shape << " has no " << table;
      EXPECT_FALSE(in_group(0, *embed)) << shape << ": " << table << " takes weight decay";
      EXPECT_TRUE(in_group(1, *embed)) << shape;
    }
    for (const auto& item : params) {
      if (std::find(tables.begin(), tables.end(), item.key()) != tables.end()) continue;
      EXPECT_EQ(in_group(0, item.value()), item.value().dim() >= 2) << shape << " " << item.key();
    }
  }
}

TEST(TrainerOptimizer, SgdNesterovStepMatchesTheFormula) {
  // One parameter with decay, one without; two steps of SGD with momentum 0.9, nesterov.
  auto w = torch::tensor({{1.0, -2.0}}, torch::requires_grad());  // dim 2: decays
  auto b = torch::tensor({0.5}, torch::requires_grad());          // dim 1: no decay
  torch::nn::Module m;
  m.register_parameter("w", w);
  m.register_parameter("b", b);
  OptimizerSpec s{"sgd", 0.1, 0.01, 0.9, true};
  auto opt = make_optimizer(s, m);
  double wv = 1.0, bv = 0.5, wbuf = 0, bbuf = 0;
  for (int it = 0; it < 2; ++it) {
    opt->zero_grad();
    auto loss = (w * w).sum() + 3 * b.sum();
    loss.backward();
    opt->step();
    // PyTorch's SGD: g += wd*p; buf = mu*buf + g (buf = g on the first step); g = g + mu*buf.
    double gw = 2 * wv + 0.01 * wv, gb = 3.0;
    wbuf = it == 0 ? gw : 0.9 * wbuf + gw;
    bbuf = it == 0 ? gb : 0.9 * bbuf + gb;
    wv -= 0.1 * (gw + 0.9 * wbuf);
    bv -= 0.1 * (gb + 0.9 * bbuf);
    // float32 parameters against the formula in double: a few roundings of values below 2
    // (an ulp is 1.2e-7 there) per step; measured 1.6e-8. A dropped Nesterov or decay term moves
    // a value by 0.27 or 1e-3.
    EXPECT_NEAR(w[0][0].item<double>(), wv, 1e-6);
    EXPECT_NEAR(b[0].item<double>(), bv, 1e-6);
  }
}

}  // namespace
}  // namespace gpulab::train
