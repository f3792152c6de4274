// The synthetic benchmark set: pixel values and labels are a hash of (seed, index, position),
// so every run, rank and worker sees the same images without any files.
#include "core/error.h"
#include "train/data/in_memory.h"
#include "train/data/sources.h"
#include "train/data/transforms.h"

namespace gpulab::train {

namespace {

class SyntheticDataset : public Dataset {
 public:
  SyntheticDataset(int64_t size, int64_t classes, std::vector<int64_t> shape, uint64_t seed)
      : size_(size), classes_(classes), shape_(std::move(shape)), seed_(seed) {}

  std::string name() const override { return "synthetic"; }
  std::string source() const override { return "generated in memory (no files)"; }
  int64_t size() const override { return size_; }
  int64_t num_classes() const override { return classes_; }
  std::vector<int64_t> image_shape() const override { return shape_; }

  int64_t get(int64_t index, torch::Tensor out) const override {
    GPULAB_ASSERT(index >= 0 && index < size_, "index out of range");
    const int64_t n = shape_[0] * shape_[1] * shape_[2];
    auto* p = out.data_ptr<uint8_t>();
    const uint64_t base = mix64(seed_ ^ mix64(static_cast<uint64_t>(index) + 1));
    // Eight pixels per hash.
    for (int64_t k = 0; k < n; k += 8) {
      uint64_t h = mix64(base + static_cast<uint64_t>(k));
      for (int64_t j = 0; j < 8 && k + j < n; ++j) p[k + j] = static_cast<uint8_t>(h >> (8 * j));
    }
    return label(index);
  }

  // Small sets (up to 256 MiB) are offered whole, so the on-device pipeline can take them.
  std::optional<std::pair<torch::Tensor, torch::Tensor>> in_memory() const override {
    const int64_t per = shape_[0] * shape_[1] * shape_[2];
    if (size_ * per > (int64_t{256} << 20)) return std::nullopt;
    std::call_once(once_, [&] {
      images_ = torch::empty({size_, shape_[0], shape_[1], shape_[2]}, torch::kUInt8);
      labels_ = torch::empty({size_}, torch::kInt64);
      auto* lab = labels_.data_ptr<int64_t>();
      for (int64_t i = 0; i < size_; ++i) lab[i] = get(i, images_[i]);
    });
    return std::make_pair(images_, labels_);
  }

 private:
  int64_t label(int64_t index) const {
    return static_cast<int64_t>(mix64(seed_ + 0x5eed + static_cast<uint64_t>(index)) %
                                static_cast<uint64_t>(classes_));
  }
  int64_t size_, classes_;
  std::vector<int64_t> shape_;
  uint64_t seed_;
  mutable std::once_flag once_;
  mutable torch::Tensor images_, labels_;
};

}  // namespace

DatasetPtr open_synthetic(const DatasetOptions& opts, Split split) {
  if (opts.synthetic_size <= 0 || opts.synthetic_classes <= 0 || opts.synthetic_shape.size() != 3 ||
      opts.synthetic_shape[0] <= 0 || opts.synthetic_shape[1] <= 0 || opts.synthetic_shape[2] <= 0)
    throw Exception(Code::kInvalidArgument,
                    "synthetic data set needs a positive size, class count and C×H×W shape");
  // The test split uses other images than the training split.
  const uint64_t seed = opts.seed * 2 + (split == Split::kTest ? 1 : 0);
  return std::make_shared<SyntheticDataset>(opts.synthetic_size, opts.synthetic_classes,
                                            opts.synthetic_shape, seed);
}

}  // namespace gpulab::train
