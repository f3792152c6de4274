// MNIST and Fashion-MNIST: IDX files (big-endian header, then uint8 data), gzipped or not. The
// Fashion-MNIST source also finds the copy that Debian's dataset-fashion-mnist package installs.
#include <fmt/format.h>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "formats/idx.h"
#include "train/data/in_memory.h"
#include "train/data/source_errors.h"
#include "train/data/sources.h"

namespace gpulab::train {

namespace {

const std::vector<std::string> kFashionNames = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};

// The first candidate folder holding both files (plain or .gz) of the split.
std::optional<std::pair<fs::path, fs::path>> find_files(const std::vector<fs::path>& dirs,
                                                        const std::string& prefix) {
  std::error_code ec;
  for (const auto& d : dirs) {
    for (const char* ext : {"", ".gz"}) {
      fs::path img = d / (prefix + "-images-idx3-ubyte" + ext);
      fs::path lab = d / (prefix + "-labels-idx1-ubyte" + ext);
      if (fs::is_regular_file(img, ec) && fs::is_regular_file(lab, ec))
        return std::make_pair(img, lab);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string system_fashion_mnist_dir() {
  std::error_code ec;
  for (const char* d : {"/usr/share/datasets/fashion-mnist"})
    if (fs::is_regular_file(fs::path(d) / "train-images-idx3-ubyte.gz", ec)) return d;
  return {};
}

DatasetPtr open_idx(bool fashion, const std::string& data_dir, Split split, bool use_system) {
  const std::string set = fashion ? "fashion-mnist" : "mnist";
  const fs::path root = data_dir.empty() ? fs::path(".") : fs::path(data_dir);
  std::vector<fs::path> dirs;
  if (fashion)
    dirs = {root / "fashion-mnist", root / "FashionMNIST" / "raw", root / "fashion_mnist"};
  else
    dirs = {root / "mnist", root / "MNIST" / "raw"};
  dirs.push_back(root);
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  auto files = find_files(dirs, prefix);
  bool from_system = false;
  if (!files && fashion && use_system) {
    std::string sys = system_fashion_mnist_dir();
    if (!sys.empty()) files = find_files({fs::path(sys)}, prefix);
    from_system = files.has_value();
  }
  if (!files) {
    std::error_code ec;
    throw_data_missing(set, data_dir,
                       !fs::is_directory(root, ec)
                           ? "the directory does not exist"
                           : "no " + prefix + "-images-idx3-ubyte[.gz] and " + prefix +
                                 "-labels-idx1-ubyte[.gz] in it or in " +
                                 dirs.front().filename().string() + "/");
  }
  // Parsed and size-checked in formats/idx.cpp (gzip inflated there, bounded by the header).
  auto read = [&](const fs::path& f, int dims) {
    auto bytes = read_file(f);
    if (!bytes) throw_data_corrupt(set, data_dir, f, bytes.error().message);
    auto idx = formats::parse_idx(*bytes, dims);
    if (!idx) throw_data_corrupt(set, data_dir, f, idx.error().message);
    return std::move(*idx);
  };
  const formats::IdxArray img = read(files->first, 3);
  const formats::IdxArray lab = read(files->second, 1);
  if (img.shape[0] != lab.shape[0])
    throw_data_corrupt(set, data_dir, files->second,
                       fmt::format("{} labels for {} images", lab.shape[0], img.shape[0]));
  for (size_t k = 0; k < lab.data.size(); ++k)
    if (static_cast<unsigned char>(lab.data[k]) >= 10)
      throw_data_corrupt(set, data_dir, files->second,
                         fmt::format("label {} of image {} is outside 0..9",
                                     static_cast<unsigned char>(lab.data[k]), k));
  auto images = torch::empty({img.shape[0], 1, img.shape[1], img.shape[2]}, torch::kUInt8);
  std::memcpy(images.data_ptr<uint8_t>(), img.data.data(), img.data.size());
  auto labels = torch::empty({lab.shape[0]}, torch::kUInt8);
  std::memcpy(labels.data_ptr<uint8_t>(), lab.data.data(), lab.data.size());
  std::vector<std::string> names = fashion ? kFashionNames : std::vector<std::string>{};
  if (!fashion)
    for (int k = 0; k < 10; ++k) names.push_back(std::to_string(k));
  auto ds = std::make_shared<InMemoryDataset>(set, images, labels.to(torch::kInt64), 10, names);
  const std::string folder = files->first.parent_path().string();
  ds->set_source(from_system ? folder + " (Debian's dataset-fashion-mnist package)" : folder);
  return ds;
}

}  // namespace gpulab::train
