// On-device batches for in-memory sets (see gpu_pipeline.h): one gather does crop and flip for
// the whole batch, then the same float ops as transform_image run on the batch.
#include "train/data/gpu_pipeline.h"

#include "core/error.h"

namespace gpulab::train {

namespace {
constexpr int64_t kMaxDeviceBytes = int64_t{2} << 30;  // keep the set well below device memory
constexpr int64_t kMaxSide = 64;                       // beyond this, CPU workers scale better
}  // namespace

bool GpuPipeline::suitable(const Dataset& dataset) {
  auto shape = dataset.image_shape();
  if (shape.size() != 3 || shape[1] > kMaxSide || shape[2] > kMaxSide) return false;
  if (dataset.size() * shape[0] * shape[1] * shape[2] > kMaxDeviceBytes) return false;
  return dataset.in_memory().has_value();
}

GpuPipeline::GpuPipeline(const Dataset& dataset, torch::Device device, TransformOptions transform,
                         uint64_t seed)
    : device_(device), transform_(transform), seed_(seed) {
  auto all = dataset.in_memory();
  if (!all)
    throw Exception(Code::kInvalidArgument,
                    "the on-device pipeline needs a data set held in memory; " + dataset.name() +
                        " is decoded on demand");
  images_ = all->first.to(device_);
  labels_ = all->second.to(device_);
}

std::pair<torch::Tensor, torch::Tensor> GpuPipeline::batch(const std::vector<int64_t>& indices,
                                                           int64_t epoch) const {
  using torch::indexing::Slice;
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t c = images_.size(1), h = images_.size(2), w = images_.size(3);
  auto idx = torch::tensor(indices, torch::kInt64).to(device_);
  torch::Tensor x = images_.index_select(0, idx);
  if (transform_.augment) {
    // Row and column source indices per sample, in the zero-padded image; a flip reverses the
    // columns of the crop window.
    std::vector<int64_t> rows(static_cast<size_t>(n * h)), cols(static_cast<size_t>(n * w));
    int64_t pad = 0;
    for (int64_t b = 0; b < n; ++b) {
      const auto d = draw_augment(transform_, seed_, epoch, indices[static_cast<size_t>(b)], h, w);
      pad = d.pad;
      for (int64_t y = 0; y < h; ++y) rows[static_cast<size_t>(b * h + y)] = d.top + y;
      for (int64_t j = 0; j < w; ++j)
        cols[static_cast<size_t>(b * w + j)] = d.left + (d.flip ? w - 1 - j : j);
    }
    if (pad > 0) x = torch::constant_pad_nd(x, {pad, pad, pad, pad}, 0);
    auto r = torch::tensor(rows, torch::kInt64).to(device_).view({n, 1, h, 1});
    auto q = torch::tensor(cols, torch::kInt64).to(device_).view({n, 1, 1, w});
    auto bi = torch::arange(n, torch::TensorOptions().dtype(torch::kInt64).device(device_))
                  .view({n, 1, 1, 1});
    auto ci = torch::arange(c, torch::TensorOptions().dtype(torch::kInt64).device(device_))
                  .view({1, c, 1, 1});
    x = x.index({bi, ci, r, q});  // n×c×h×w
  }
  x = x.to(torch::kFloat32).div(255);
  const int64_t s = transform_.input_size;
  if (h != s || w != s) {
    namespace F = torch::nn::functional;
    x = F::interpolate(x, F::InterpolateFuncOptions()
                              .size(std::vector<int64_t>{s, s})
                              .mode(torch::kBilinear)
                              .align_corners(false));
  }
  int64_t oc = c;
  if (transform_.out_channels > 0 && transform_.out_channels != c) {
    if (c != 1)
      throw Exception(Code::kInvalidArgument,
                      "cannot turn " + std::to_string(c) + "-channel images into " +
                          std::to_string(transform_.out_channels) + " channels");
    oc = transform_.out_channels;
    x = x.expand({n, oc, s, s});
  }
  auto [mean, std] = normalization_stats(transform_.normalize, oc);
  x = x.sub(mean.to(device_).view({1, oc, 1, 1})).div(std.to(device_).view({1, oc, 1, 1}));
  return {x.contiguous(), labels_.index_select(0, idx)};
}

}  // namespace gpulab::train
