// MNIST and Fashion-MNIST: IDX files (big-endian header, then uint8 data), gzipped or not. The
// Fashion-MNIST source also finds the copy that Debian's dataset-fashion-mnist package installs.
#include <fmt/format.h>
#include <filesystem>

#if GPULAB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "core/error.h"
#include "core/files.h"
#include "train/data/in_memory.h"
#include "train/data/source_errors.h"
#include "train/data/sources.h"

namespace gpulab::train {

namespace {

const std::vector<std::string> kFashionNames = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};

// Reads a whole file, inflating it when gzipped (zlib reads plain files through as they are).
Result<std::string> read_maybe_gz(const fs::path& file) {
#if GPULAB_HAVE_ZLIB
  gzFile gz = gzopen(file.c_str(), "rb");
  if (!gz) return Result<std::string>(Code::kNotFound, "cannot open " + file.string());
  std::string out;
  char buf[1 << 16];
  while (true) {
    int n = gzread(gz, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(gz, &err);
      gzclose(gz);
      return Result<std::string>(Code::kDataError, "gzip data is corrupt: " + msg);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  // A gzip stream cut short reads as a short file; zlib reports it on close or as an error.
  int err = 0;
  std::string msg = gzerror(gz, &err);
  int rc = gzclose(gz);
  if (err != Z_OK || rc == Z_BUF_ERROR)
    return Result<std::string>(Code::kDataError, "gzip stream ends early: " + msg);
  return out;
#else
  if (file.extension() == ".gz")
    return Result<std::string>(Code::kUnsupported, "gpulab was built without zlib; unpack " +
                                                       file.string() + " with gunzip");
  return read_file(file);
#endif
}

uint32_t be32(const std::string& s, size_t off) {
  return (uint32_t{static_cast<unsigned char>(s[off])} << 24) |
         (uint32_t{static_cast<unsigned char>(s[off + 1])} << 16) |
         (uint32_t{static_cast<unsigned char>(s[off + 2])} << 8) |
         uint32_t{static_cast<unsigned char>(s[off + 3])};
}

// Parses an IDX file of uint8 data with `dims` dimensions; checks its size against the header.
std::vector<int64_t> parse_idx(const std::string& set, const std::string& data_dir,
                               const fs::path& file, const std::string& bytes, int dims) {
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) throw_data_corrupt(set, data_dir, file, "shorter than its header");
  const uint32_t magic = be32(bytes, 0);
  if (magic != 0x800u + static_cast<uint32_t>(dims))
    throw_data_corrupt(set, data_dir, file,
                       fmt::format("magic 0x{:08x}, expected 0x{:08x} (uint8, {} dims)", magic,
                                   0x800 + dims, dims));
  std::vector<int64_t> shape;
  uint64_t total = 1;
  for (int d = 0; d < dims; ++d) {
    shape.push_back(be32(bytes, 4 + 4 * static_cast<size_t>(d)));
    total *= static_cast<uint64_t>(shape.back());
  }
  if (bytes.size() - header != total)
    throw_data_corrupt(
        set, data_dir, file,
        fmt::format("holds {} data bytes, its header says {}", bytes.size() - header, total));
  return shape;
}

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
  if (!files && fashion && use_system) {
    std::string sys = system_fashion_mnist_dir();
    if (!sys.empty()) files = find_files({fs::path(sys)}, prefix);
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
  auto read = [&](const fs::path& f) {
    auto bytes = read_maybe_gz(f);
    if (!bytes) throw_data_corrupt(set, data_dir, f, bytes.error().message);
    return std::move(*bytes);
  };
  const std::string img = read(files->first);
  const std::string lab = read(files->second);
  auto ishape = parse_idx(set, data_dir, files->first, img, 3);
  auto lshape = parse_idx(set, data_dir, files->second, lab, 1);
  if (ishape[0] != lshape[0])
    throw_data_corrupt(set, data_dir, files->second,
                       fmt::format("{} labels for {} images", lshape[0], ishape[0]));
  auto images = torch::empty({ishape[0], 1, ishape[1], ishape[2]}, torch::kUInt8);
  std::memcpy(images.data_ptr<uint8_t>(), img.data() + 16, static_cast<size_t>(images.numel()));
  auto labels = torch::empty({lshape[0]}, torch::kUInt8);
  std::memcpy(labels.data_ptr<uint8_t>(), lab.data() + 8, static_cast<size_t>(lshape[0]));
  std::vector<std::string> names = fashion ? kFashionNames : std::vector<std::string>{};
  if (!fashion)
    for (int k = 0; k < 10; ++k) names.push_back(std::to_string(k));
  return std::make_shared<InMemoryDataset>(set, images, labels.to(torch::kInt64), 10, names);
}

}  // namespace gpulab::train
