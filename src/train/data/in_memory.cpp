// InMemoryDataset: checks shapes and label range once, then serves copies of single images.
#include "train/data/in_memory.h"

#include <cstring>

#include "core/error.h"

namespace gpulab::train {

InMemoryDataset::InMemoryDataset(std::string name, torch::Tensor images, torch::Tensor labels,
                                 int64_t num_classes, std::vector<std::string> class_names)
    : name_(std::move(name)),
      images_(images.contiguous()),
      labels_(labels.to(torch::kInt64).contiguous()),
      num_classes_(num_classes),
      class_names_(std::move(class_names)) {
  GPULAB_ASSERT(images_.dim() == 4 && images_.scalar_type() == torch::kUInt8,
                "in-memory images must be N×C×H×W uint8");
  GPULAB_ASSERT(labels_.dim() == 1 && labels_.size(0) == images_.size(0), "one label per image");
  if (labels_.numel() > 0) {
    int64_t lo = labels_.min().item<int64_t>();
    int64_t hi = labels_.max().item<int64_t>();
    if (lo < 0 || hi >= num_classes_)
      throw Exception(Code::kDataError,
                      name_ + ": label " + std::to_string(lo < 0 ? lo : hi) + " is outside 0.." +
                          std::to_string(num_classes_ - 1),
                      "the data files are corrupt; download them again");
  }
}

std::vector<int64_t> InMemoryDataset::image_shape() const {
  return {images_.size(1), images_.size(2), images_.size(3)};
}

int64_t InMemoryDataset::get(int64_t index, torch::Tensor out) const {
  GPULAB_ASSERT(index >= 0 && index < size(), "index out of range");
  GPULAB_ASSERT(out.is_contiguous() && out.scalar_type() == torch::kUInt8 &&
                    out.numel() == images_[0].numel(),
                "get() needs a contiguous uint8 tensor of image_shape()");
  const int64_t bytes = out.numel();
  std::memcpy(out.data_ptr<uint8_t>(), images_.data_ptr<uint8_t>() + index * bytes,
              static_cast<size_t>(bytes));
  return labels_.data_ptr<int64_t>()[index];
}

}  // namespace gpulab::train
