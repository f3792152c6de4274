// The trainer's memory-layout choice: --memory_format auto takes channels-last for the measured
// families in fp32 on the CPU only; the flags force or refuse it; a contradiction is an error;
// the conversion keeps the parameters' identity; a short run says which layout it used.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "train/memory_format.h"
#include "train/models/registry.h"
#include "train/train_options.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

TEST(TrainerOptions, MemoryFormatValuesAndContradiction) {
  TrainOptions o;
  EXPECT_EQ(o.memory_format, "auto");
  o.memory_format = "nhwc";
  auto s = validate(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().hint.find("auto, channels_last, contiguous"), std::string::npos);
  o.memory_format = "contiguous";
  EXPECT_TRUE(validate(o).ok());
  o.channels_last = true;
  EXPECT_FALSE(validate(o).ok());
  o.memory_format = "channels_last";
  EXPECT_TRUE(validate(o).ok());
  EXPECT_EQ(options_to_json(o)["memory_format"], "channels_last");
}

TEST(MemoryFormat, AutoIsChannelsLastForConvNetsInFp32OnTheCpu) {
  const torch::Device cpu(torch::kCPU);
  TrainOptions o;
  auto c = choose_memory_format(o, cpu, "resnet");
  EXPECT_TRUE(c.channels_last);
  EXPECT_EQ(c.name, "channels_last");
  EXPECT_NE(c.reason.find("auto"), std::string::npos) << c.reason;
  EXPECT_TRUE(choose_memory_format(o, cpu, "mobilenet").channels_last);
  EXPECT_FALSE(choose_memory_format(o, cpu, "vit").channels_last);
  o.precision = "bf16";
  EXPECT_FALSE(choose_memory_format(o, cpu, "resnet").channels_last);
  o.precision = "fp64";
  EXPECT_FALSE(choose_memory_format(o, cpu, "resnet").channels_last);
  o = {};
  o.memory_format = "contiguous";
  c = choose_memory_format(o, cpu, "resnet");
  EXPECT_FALSE(c.channels_last);
  EXPECT_EQ(c.name, "contiguous");
  EXPECT_NE(c.reason.find("--memory_format contiguous"), std::string::npos) << c.reason;
  // The flags force it wherever: another family, another precision, another device.
  o = {};
  o.channels_last = true;
  o.precision = "bf16";
  EXPECT_TRUE(choose_memory_format(o, cpu, "vit").channels_last);
  o = {};
  o.memory_format = "channels_last";
  EXPECT_TRUE(choose_memory_format(o, torch::Device(torch::kCUDA, 0), "vgg").channels_last);
  EXPECT_FALSE(
      choose_memory_format(TrainOptions{}, torch::Device(torch::kCUDA, 0), "resnet").channels_last);
  // Every family the registry knows gets a decision (the list holds real family names).
  int faster = 0;
  for (const auto& m : model_table()) faster += channels_last_faster_on_cpu(m.family) ? 1 : 0;
  EXPECT_GT(faster, 0);
}

TEST(MemoryFormat, ConversionKeepsParametersInPlace) {
  torch::nn::Sequential net(torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)),
                            torch::nn::BatchNorm2d(4), torch::nn::Flatten(),
                            torch::nn::Linear(4 * 6 * 6, 2));
  auto before = net->parameters();
  auto values = before[0].detach().clone();
  make_channels_last(*net);
  auto after = net->parameters();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(before[i].unsafeGetTensorImpl(), after[i].unsafeGetTensorImpl());
  EXPECT_TRUE(after[0].is_contiguous(torch::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(torch::equal(after[0], values));
  // The gradient follows the parameter's layout (what the one-pass SGD step relies on).
  auto x = torch::randn({2, 3, 8, 8}).contiguous(torch::MemoryFormat::ChannelsLast);
  net->forward(x).sum().backward();
  EXPECT_EQ(after[0].grad().strides(), after[0].strides());
}

TEST(MemoryFormat, TrainRunSaysWhichLayoutItUsedAndResumesAcrossLayouts) {
  const auto dir = testing::temp_dir("memfmt");
  auto run = [&](int epochs, std::vector<std::string> extra) {
    std::vector<std::string> args = {"train",
                                     "--model",
                                     "resnet18",
                                     "--dataset",
                                     "synthetic",
                                     "--input_size",
                                     "32",
                                     "--subset",
                                     "16",
                                     "--batch_size",
                                     "8",
                                     "--num_epochs",
                                     std::to_string(epochs),
                                     "--device",
                                     "cpu",
                                     "--threads",
                                     "1",
                                     "--no_report",
                                     "--output_dir",
                                     (dir / "run").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::run_gpulab(args);
  };
  // A checkpoint written in the contiguous layout, resumed by a run that picks channels-last.
  auto off = run(1, {"--memory_format", "contiguous"});
  ASSERT_EQ(off.exit_code, 0) << off.out << off.err;
  EXPECT_NE(off.out.find("Memory format: contiguous (--memory_format contiguous)"),
            std::string::npos)
      << off.out;
  auto on = run(2, {"--resume", "auto"});
  ASSERT_EQ(on.exit_code, 0) << on.out << on.err;
  EXPECT_NE(on.out.find("Resumed from"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("Memory format: channels_last (auto"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("Precision: fp32, channels_last"), std::string::npos) << on.out;
  EXPECT_NE(on.out.find("Epoch 2/2"), std::string::npos) << on.out;
  auto bad =
      testing::run_gpulab({"train", "--dataset", "synthetic", "--channels_last", "--memory_format",
                           "contiguous", "--output_dir", (dir / "bad").string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("contradict"), std::string::npos) << bad.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
