// Per-sample transforms of the input pipeline: random crop with padding and horizontal flip
// (training), bilinear resize to the model's input size (as torchvision's Resize on tensors,
// without antialiasing), 1→3 channel replication, and the seed's normalizations. Random
// decisions come from (seed, epoch, index) alone, so results do not depend on threads.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace gpulab::train {

// The seed's --normalize names.
enum class Normalization { kImagenet, kZeroOne, kNegOneOne };
// "imagenet", "zero_one", "neg_one_one"; throws gpulab::Exception (kInvalidArgument) otherwise.
Normalization parse_normalization(std::string_view text);
std::string_view normalization_name(Normalization n);

struct TransformOptions {
  int64_t input_size = 224;  // output is out_channels × input_size × input_size
  Normalization normalize = Normalization::kImagenet;
  bool augment = false;         // random crop + flip (set for the training split)
  int64_t crop_padding = -1;    // < 0: 4 px for images up to 64 px, else 1/8 of the side
  bool horizontal_flip = true;  // with augment: flip with probability 1/2
  int64_t out_channels = 3;     // 1-channel sets are replicated to 3; 0 keeps the channels
};

// The random choices for one sample: crop origin in the zero-padded image, and the flip.
struct AugmentDecision {
  int64_t top = 0;  // in [0, 2*pad]; pad when not augmenting (the centre, i.e. no crop)
  int64_t left = 0;
  int64_t pad = 0;
  bool flip = false;
};

// Padding actually used for an image of the given side.
int64_t effective_padding(const TransformOptions& opts, int64_t side);

// Deterministic decision for sample `index` of `epoch` under `seed`.
AugmentDecision draw_augment(const TransformOptions& opts, uint64_t seed, int64_t epoch,
                             int64_t index, int64_t height, int64_t width);

// Applies crop/flip (from `d`), resize, channel replication and normalization to one uint8
// C×H×W image; returns float out_channels × S × S (contiguous). Writes into `out` if defined.
torch::Tensor transform_image(const torch::Tensor& image_u8, const AugmentDecision& d,
                              const TransformOptions& opts, torch::Tensor out = {});

// Per-channel mean and std of a normalization for `channels` channels (float tensors, {C}).
std::pair<torch::Tensor, torch::Tensor> normalization_stats(Normalization n, int64_t channels);

// 64-bit mixer (splitmix64 finalizer) shared by samplers, augmentation and the synthetic set.
uint64_t mix64(uint64_t x);

}  // namespace gpulab::train
