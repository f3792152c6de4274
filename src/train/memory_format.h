// The memory layout the trainer keeps images and 4-D weights in. --memory_format auto picks
// channels-last where it was measured faster (the convolutional families on the CPU, where
// libtorch's oneDNN kernels run NHWC natively) and the default contiguous (NCHW) layout elsewhere;
// --memory_format channels_last (or --channels_last) forces it, contiguous turns it off.
#pragma once

#include <torch/torch.h>

#include <string>
#include <string_view>

#include "train/train_options.h"

namespace gpulab::train {

struct MemoryFormatChoice {
  bool channels_last = false;
  std::string name;    // "channels_last" or "contiguous"
  std::string reason;  // why, for the run's header: "auto: ...", "--channels_last", ...
};

// Decides from the options, the device and the model family (train/models/registry.h).
MemoryFormatChoice choose_memory_format(const TrainOptions& opts, const torch::Device& device,
                                        std::string_view family);

// The families that --memory_format auto trains channels-last on the CPU.
bool channels_last_faster_on_cpu(std::string_view family);

// Puts every 4-D parameter of the model in channels-last layout, in place (the parameters keep
// their identity, so an optimizer or a DDP bucket built on them stays valid).
void make_channels_last(torch::nn::Module& model);

}  // namespace gpulab::train
