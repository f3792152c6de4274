// CIFAR-10 and CIFAR-100 in both distributed formats: the Python version (cPickle'd dicts with
// a numpy uint8 N×3072 "data" array) and the binary version (fixed-size records).
#include <fmt/format.h>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "formats/cifar_batch.h"
#include "train/data/in_memory.h"
#include "train/data/source_errors.h"
#include "train/data/sources.h"

namespace gpulab::train {

namespace {

constexpr int64_t kPixels = formats::kCifarPixels;

const std::vector<std::string> kCifar10Names = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                "dog",      "frog",       "horse", "ship", "truck"};

struct CifarLayout {
  std::string set;  // "cifar10" / "cifar100"
  fs::path folder;
  bool python = true;
};

CifarLayout find_layout(int classes, const std::string& data_dir) {
  const std::string set = classes == 10 ? "cifar10" : "cifar100";
  const fs::path root = data_dir.empty() ? fs::path(".") : fs::path(data_dir);
  const std::string py = classes == 10 ? "cifar-10-batches-py" : "cifar-100-python";
  const std::string bin = classes == 10 ? "cifar-10-batches-bin" : "cifar-100-binary";
  const std::string py_probe = classes == 10 ? "data_batch_1" : "train";
  const std::string bin_probe = classes == 10 ? "data_batch_1.bin" : "train.bin";
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw_data_missing(set, data_dir, "the directory does not exist");
  if (fs::is_directory(root / py, ec)) return {set, root / py, true};
  if (fs::is_directory(root / bin, ec)) return {set, root / bin, false};
  // data_dir may name the unpacked folder itself.
  if (fs::is_regular_file(root / bin_probe, ec)) return {set, root, false};
  if (fs::is_regular_file(root / py_probe, ec)) return {set, root, true};
  throw_data_missing(set, data_dir, "no " + py + "/ or " + bin + "/ folder in it");
}

std::string read_or_throw(const CifarLayout& l, const std::string& data_dir, const fs::path& file) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw_data_missing(l.set, data_dir, file.string() + " is missing");
  auto data = read_file(file);
  if (!data) throw_data_corrupt(l.set, data_dir, file, data.error().message);
  return std::move(*data);
}

// One pickled batch (checked in formats/cifar_batch.cpp): appends its images and labels.
void read_python_batch(const CifarLayout& l, const std::string& data_dir, const fs::path& file,
                       const char* label_key, int64_t num_classes,
                       std::vector<torch::Tensor>& images, std::vector<int64_t>& labels) {
  const std::string bytes = read_or_throw(l, data_dir, file);
  auto batch = formats::parse_cifar_python_batch(bytes, label_key, num_classes);
  if (!batch) throw_data_corrupt(l.set, data_dir, file, batch.error().message);
  auto t = torch::empty({batch->count, 3, 32, 32}, torch::kUInt8);
  std::memcpy(t.data_ptr<uint8_t>(), batch->pixels.data(), batch->pixels.size());
  images.push_back(t);
  labels.insert(labels.end(), batch->labels.begin(), batch->labels.end());
}

// One binary file of fixed records: [coarse] label, 3072 pixels.
void read_binary_batch(const CifarLayout& l, const std::string& data_dir, const fs::path& file,
                       bool cifar100, bool coarse, int64_t num_classes,
                       std::vector<torch::Tensor>& images, std::vector<int64_t>& labels) {
  const std::string bytes = read_or_throw(l, data_dir, file);
  const int64_t rec = kPixels + (cifar100 ? 2 : 1);
  const auto size = static_cast<int64_t>(bytes.size());
  if (size == 0 || size % rec != 0)
    throw_data_corrupt(l.set, data_dir, file,
                       fmt::format("{} bytes is not a whole number of {}-byte records", size, rec));
  const int64_t n = size / rec;
  auto t = torch::empty({n, 3, 32, 32}, torch::kUInt8);
  auto* dst = t.data_ptr<uint8_t>();
  for (int64_t k = 0; k < n; ++k) {
    const char* r = bytes.data() + k * rec;
    const int64_t label = static_cast<unsigned char>(cifar100 ? r[coarse ? 0 : 1] : r[0]);
    if (label >= num_classes)
      throw_data_corrupt(
          l.set, data_dir, file,
          fmt::format("label {} of record {} is outside 0..{}", label, k, num_classes - 1));
    labels.push_back(label);
    std::memcpy(dst + k * kPixels, r + (cifar100 ? 2 : 1), kPixels);
  }
  images.push_back(t);
}

std::vector<std::string> text_lines(const fs::path& file) {
  std::vector<std::string> out;
  auto text = read_file(file);
  if (!text) return out;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    std::string line = text->substr(start, end - start);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) out.push_back(line);
    start = end + 1;
  }
  return out;
}

// Class names from the meta file; optional (a missing or odd meta file is not fatal).
std::vector<std::string> python_names(const fs::path& meta, const char* key) {
  auto bytes = read_file(meta);
  if (!bytes) return {};
  return formats::parse_cifar_label_names(*bytes, key);
}

}  // namespace

DatasetPtr open_cifar(int classes, const std::string& data_dir, Split split, bool coarse) {
  const CifarLayout l = find_layout(classes, data_dir);
  const bool c100 = classes == 100;
  const int64_t num_classes = c100 ? (coarse ? 20 : 100) : 10;
  std::vector<torch::Tensor> images;
  std::vector<int64_t> labels;
  std::vector<std::string> names;
  if (l.python) {
    const char* key = c100 ? (coarse ? "coarse_labels" : "fine_labels") : "labels";
    std::vector<std::string> files;
    if (c100)
      files = {split == Split::kTrain ? "train" : "test"};
    else if (split == Split::kTest)
      files = {"test_batch"};
    else
      for (int k = 1; k <= 5; ++k) files.push_back("data_batch_" + std::to_string(k));
    for (const auto& f : files)
      read_python_batch(l, data_dir, l.folder / f, key, num_classes, images, labels);
    names =
        c100 ? python_names(l.folder / "meta", coarse ? "coarse_label_names" : "fine_label_names")
             : python_names(l.folder / "batches.meta", "label_names");
  } else {
    std::vector<std::string> files;
    if (c100)
      files = {split == Split::kTrain ? "train.bin" : "test.bin"};
    else if (split == Split::kTest)
      files = {"test_batch.bin"};
    else
      for (int k = 1; k <= 5; ++k) files.push_back("data_batch_" + std::to_string(k) + ".bin");
    for (const auto& f : files)
      read_binary_batch(l, data_dir, l.folder / f, c100, coarse, num_classes, images, labels);
    names =
        text_lines(l.folder / (c100 ? (coarse ? "coarse_label_names.txt" : "fine_label_names.txt")
                                    : "batches.meta.txt"));
  }
  if (static_cast<int64_t>(names.size()) != num_classes)
    names = c100 ? std::vector<std::string>{} : kCifar10Names;
  auto all = images.size() == 1 ? images[0] : torch::cat(images);
  auto lab = torch::tensor(labels, torch::kInt64);
  std::string name = c100 ? (coarse ? "cifar100-coarse" : "cifar100") : "cifar10";
  auto ds = std::make_shared<InMemoryDataset>(name, all, lab, num_classes, std::move(names));
  ds->set_source(l.folder.string());
  return ds;
}

}  // namespace gpulab::train
