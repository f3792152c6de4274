// Per-sample transforms (see transforms.h). The on-device pipeline applies the same ops to whole
// batches, in the same order, so both paths give the same numbers.
#include "train/data/transforms.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace gpulab::train {

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

Normalization parse_normalization(std::string_view text) {
  const std::string t = to_lower(text);
  if (t == "imagenet") return Normalization::kImagenet;
  if (t == "zero_one") return Normalization::kZeroOne;
  if (t == "neg_one_one") return Normalization::kNegOneOne;
  throw Exception(Code::kInvalidArgument, "unknown normalization '" + std::string(text) + "'",
                  "use imagenet, zero_one or neg_one_one");
}

std::string_view normalization_name(Normalization n) {
  switch (n) {
    case Normalization::kImagenet:
      return "imagenet";
    case Normalization::kZeroOne:
      return "zero_one";
    case Normalization::kNegOneOne:
      return "neg_one_one";
  }
  return "?";
}

int64_t effective_padding(const TransformOptions& opts, int64_t side) {
  if (opts.crop_padding >= 0) return opts.crop_padding;
  return side <= 64 ? 4 : side / 8;
}

AugmentDecision draw_augment(const TransformOptions& opts, uint64_t seed, int64_t epoch,
                             int64_t index, int64_t height, int64_t width) {
  AugmentDecision d;
  if (!opts.augment) return d;
  d.pad = effective_padding(opts, std::min(height, width));
  const uint64_t key = mix64(mix64(seed ^ 0xA0761D6478BD642Full) ^ static_cast<uint64_t>(epoch));
  const uint64_t r = mix64(key ^ mix64(static_cast<uint64_t>(index)));
  const auto span = static_cast<uint64_t>(2 * d.pad + 1);
  d.top = static_cast<int64_t>((r & 0xFFFFFF) % span);
  d.left = static_cast<int64_t>(((r >> 24) & 0xFFFFFF) % span);
  d.flip = opts.horizontal_flip && ((r >> 63) & 1) != 0;
  return d;
}

std::pair<torch::Tensor, torch::Tensor> normalization_stats(Normalization n, int64_t channels) {
  std::vector<float> mean(static_cast<size_t>(channels)), std(static_cast<size_t>(channels));
  const float im_mean[3] = {0.485f, 0.456f, 0.406f};
  const float im_std[3] = {0.229f, 0.224f, 0.225f};
  for (int64_t c = 0; c < channels; ++c) {
    switch (n) {
      case Normalization::kImagenet:
        // One channel (grey, not replicated) gets the mean of the three.
        mean[c] = channels == 3 ? im_mean[c] : (im_mean[0] + im_mean[1] + im_mean[2]) / 3;
        std[c] = channels == 3 ? im_std[c] : (im_std[0] + im_std[1] + im_std[2]) / 3;
        break;
      case Normalization::kZeroOne:
        mean[c] = 0, std[c] = 1;
        break;
      case Normalization::kNegOneOne:
        mean[c] = 0.5f, std[c] = 0.5f;
        break;
    }
  }
  return {torch::tensor(mean), torch::tensor(std)};
}

torch::Tensor transform_image(const torch::Tensor& image_u8, const AugmentDecision& d,
                              const TransformOptions& opts, torch::Tensor out) {
  GPULAB_ASSERT(image_u8.dim() == 3 && image_u8.scalar_type() == torch::kUInt8,
                "transform_image takes a uint8 C×H×W image");
  const int64_t c = image_u8.size(0), h = image_u8.size(1), w = image_u8.size(2);
  torch::Tensor x = image_u8;
  if (d.pad > 0 || d.top > 0 || d.left > 0) {
    x = torch::constant_pad_nd(x, {d.pad, d.pad, d.pad, d.pad}, 0);
    x = x.narrow(1, d.top, h).narrow(2, d.left, w);
  }
  if (d.flip) x = x.flip({2});
  x = x.to(torch::kFloat32).div(255);
  const int64_t s = opts.input_size;
  if (h != s || w != s) {
    namespace F = torch::nn::functional;
    x = F::interpolate(x.unsqueeze(0), F::InterpolateFuncOptions()
                                           .size(std::vector<int64_t>{s, s})
                                           .mode(torch::kBilinear)
                                           .align_corners(false))
            .squeeze(0);
  }
  int64_t oc = c;
  if (opts.out_channels > 0 && opts.out_channels != c) {
    if (c != 1)
      throw Exception(Code::kInvalidArgument, "cannot turn " + std::to_string(c) +
                                                  "-channel images into " +
                                                  std::to_string(opts.out_channels) + " channels");
    oc = opts.out_channels;
    x = x.expand({oc, s, s});
  }
  auto [mean, std] = normalization_stats(opts.normalize, oc);
  x = x.sub(mean.view({oc, 1, 1})).div(std.view({oc, 1, 1}));
  if (out.defined()) {
    out.copy_(x);
    return out;
  }
  return x.contiguous();
}

}  // namespace gpulab::train
