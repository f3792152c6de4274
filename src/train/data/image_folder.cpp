// ImageFolder: one directory per class (<data_dir>/<split>/<class>/<image>), JPEG and PNG files
// decoded on demand (in loader workers) and resized to a fixed square size. The class list comes
// from the training folder, so a test folder that lacks a class is caught when it is opened.
#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"
#include "train/data/image_codec.h"
#include "train/data/source_errors.h"
#include "train/data/sources.h"

namespace gpulab::train {

namespace {

bool is_image_file(const fs::path& p) {
  const std::string ext = to_lower(p.extension().string());
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

std::vector<std::string> class_dirs(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory(ec) && e.path().filename().string()[0] != '.')
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

class ImageFolderDataset : public Dataset {
 public:
  ImageFolderDataset(std::vector<std::string> classes, std::vector<fs::path> files,
                     std::vector<int64_t> labels, int64_t size)
      : classes_(std::move(classes)),
        files_(std::move(files)),
        labels_(std::move(labels)),
        size_(size) {}

  std::string name() const override { return "imagefolder"; }
  // The split's folder: <split>/<class>/<image>.
  std::string source() const override {
    return files_.empty() ? "" : files_.front().parent_path().parent_path().string();
  }
  int64_t size() const override { return static_cast<int64_t>(files_.size()); }
  int64_t num_classes() const override { return static_cast<int64_t>(classes_.size()); }
  std::vector<std::string> class_names() const override { return classes_; }
  std::vector<int64_t> image_shape() const override { return {3, size_, size_}; }

  int64_t get(int64_t index, torch::Tensor out) const override {
    GPULAB_ASSERT(index >= 0 && index < size(), "index out of range");
    const auto& file = files_[static_cast<size_t>(index)];
    auto bytes = read_file(file);
    if (!bytes) throw Exception(Code::kDataError, "cannot read " + file.string());
    auto img = decode_image(*bytes);
    if (!img)
      throw Exception(img.error().code, file.string() + ": " + img.error().message,
                      "remove or replace the file");
    resize_uint8(*img, size_, out.view({3, size_, size_}));
    return labels_[static_cast<size_t>(index)];
  }

 private:
  std::vector<std::string> classes_;
  std::vector<fs::path> files_;
  std::vector<int64_t> labels_;
  int64_t size_;
};

}  // namespace

DatasetPtr open_image_folder(const std::string& data_dir, Split split, int64_t image_size) {
  const std::string set = "imagefolder";
  const fs::path root = data_dir.empty() ? fs::path(".") : fs::path(data_dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    throw_data_missing(set, data_dir, "the directory does not exist");
  if (image_size <= 0)
    throw Exception(Code::kInvalidArgument, "imagefolder needs a positive image size");
  // <root>/train holds the classes; without it, <root> itself is the training folder.
  const fs::path train_dir = fs::is_directory(root / "train", ec) ? root / "train" : root;
  fs::path dir = train_dir;
  if (split == Split::kTest) {
    if (fs::is_directory(root / "test", ec))
      dir = root / "test";
    else if (fs::is_directory(root / "val", ec))
      dir = root / "val";
    else
      throw_data_missing(set, data_dir, "no test/ or val/ folder for the test split");
  }
  std::vector<std::string> classes = class_dirs(train_dir);
  classes.erase(std::remove_if(classes.begin(), classes.end(),
                               [&](const std::string& c) {
                                 return train_dir == root &&
                                        (c == "test" || c == "val" || c == "train");
                               }),
                classes.end());
  if (classes.empty())
    throw_data_missing(set, data_dir, "no class folders in " + train_dir.string());
  std::vector<fs::path> files;
  std::vector<int64_t> labels;
  for (size_t c = 0; c < classes.size(); ++c) {
    const fs::path cdir = dir / classes[c];
    if (!fs::is_directory(cdir, ec))
      throw Exception(
          Code::kNotFound,
          "class '" + classes[c] + "' of " + train_dir.string() + " is missing in " + dir.string(),
          "every split needs the same class folders");
    std::vector<fs::path> mine;
    for (const auto& e : fs::directory_iterator(cdir, ec))
      if (e.is_regular_file(ec) && is_image_file(e.path())) mine.push_back(e.path());
    if (mine.empty())
      throw Exception(Code::kNotFound, "class folder " + cdir.string() + " holds no JPEG or PNG",
                      "every class needs at least one image");
    std::sort(mine.begin(), mine.end());
    for (auto& f : mine) {
      files.push_back(std::move(f));
      labels.push_back(static_cast<int64_t>(c));
    }
  }
  return std::make_shared<ImageFolderDataset>(std::move(classes), std::move(files),
                                              std::move(labels), image_size);
}

}  // namespace gpulab::train
