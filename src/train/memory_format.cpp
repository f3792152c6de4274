// Memory layout choice for training (see memory_format.h), and the conversion of a model.
#include "train/memory_format.h"

#include <array>

namespace gpulab::train {

bool channels_last_faster_on_cpu(std::string_view family) {
  // Measured with libtorch 1.13 on an AVX-512 CPU (README, Benchmarks): one fp32 training step
  // of ResNet-18/50 at 32 px takes 15 % less time, MobileNet-V2 half; NCHW max-pooling and batch
  // norm are 3-10x slower than their NHWC kernels.
  constexpr std::array<std::string_view, 2> kFaster = {"resnet", "mobilenet"};
  for (auto f : kFaster)
    if (f == family) return true;
  return false;
}

MemoryFormatChoice choose_memory_format(const TrainOptions& o, const torch::Device& device,
                                        std::string_view family) {
  MemoryFormatChoice c;
  if (o.channels_last || o.memory_format == "channels_last") {
    c.channels_last = true;
    c.reason = o.channels_last ? "--channels_last" : "--memory_format channels_last";
  } else if (o.memory_format == "contiguous") {
    c.reason = "--memory_format contiguous";
  } else if (!device.is_cpu()) {
    c.reason = "auto: the default layout off the CPU (--channels_last to change)";
  } else if (o.precision != "fp32" && o.precision != "tf32") {
    // Measured in fp32 only (tf32 is fp32 on a CPU); bf16 and the fp64 numerics check keep the
    // layout they had.
    c.reason = "auto: channels-last is chosen for fp32 on the CPU only";
  } else if (!channels_last_faster_on_cpu(family)) {
    c.reason = "auto: not measured faster for " + std::string(family) + " on the CPU";
  } else {
    c.channels_last = true;
    c.reason = "auto: faster for " + std::string(family) +
               " on the CPU (--memory_format contiguous turns it off)";
  }
  c.name = c.channels_last ? "channels_last" : "contiguous";
  return c;
}

void make_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters())
    if (p.dim() == 4) p.set_data(p.contiguous(torch::MemoryFormat::ChannelsLast));
}

}  // namespace gpulab::train
