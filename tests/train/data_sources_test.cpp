// Data-set sources: CIFAR-10/100 in every distributed format (pickles as cPickle wrote them and
// as Python 3 re-pickles them, and the binary version), IDX (the real Fashion-MNIST from Debian
// and generated MNIST files), and the errors for wrong folders, missing and truncated files.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data_test_util.h"
#include "formats/pickle.h"
#include "train/data/datasets.h"
#include "train/data/sources.h"

namespace gpulab::train {
namespace {

using testing::TempDir;

// Expected CIFAR images of file `f` (n images), as make_cifar.py writes them.
torch::Tensor expected_cifar(int64_t f, int64_t n) {
  auto t = torch::empty({n, 3, 32, 32}, torch::kUInt8);
  auto* p = t.data_ptr<uint8_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < 3072; ++k) p[i * 3072 + k] = testing::cifar_pixel(f, i, k);
  return t;
}

Code code_of(const std::function<void()>& fn, std::string* msg = nullptr,
             std::string* hint = nullptr) {
  try {
    fn();
  } catch (const Exception& e) {
    if (msg) *msg = e.what();
    if (hint) *hint = e.hint();
    return e.code();
  }
  return Code::kOk;
}

class CifarFormats : public ::testing::TestWithParam<std::string> {};

TEST_P(CifarFormats, Cifar10DecodesPixelsAndLabelsExactly) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  const int n = 5;
  testing::make_cifar(dir.path, "cifar10", GetParam(), n);
  auto train = open_dataset("cifar10", dir.path.string(), Split::kTrain);
  auto test = open_dataset("cifar10", dir.path.string(), Split::kTest);
  ASSERT_EQ(train->size(), 5 * n);
  ASSERT_EQ(test->size(), n);
  EXPECT_EQ(train->num_classes(), 10);
  EXPECT_EQ(train->image_shape(), (std::vector<int64_t>{3, 32, 32}));
  auto [imgs, labels] = *train->in_memory();
  for (int f = 1; f <= 5; ++f) {
    EXPECT_TRUE(torch::equal(imgs.narrow(0, (f - 1) * n, n), expected_cifar(f, n))) << f;
    for (int i = 0; i < n; ++i)
      EXPECT_EQ(labels[(f - 1) * n + i].item<int64_t>(), testing::cifar_label(f, i, 10));
  }
  auto [timgs, tlabels] = *test->in_memory();
  EXPECT_TRUE(torch::equal(timgs, expected_cifar(0, n)));
  // get() agrees with the bulk view.
  auto one = torch::empty({3, 32, 32}, torch::kUInt8);
  EXPECT_EQ(test->get(3, one), testing::cifar_label(0, 3, 10));
  EXPECT_TRUE(torch::equal(one, timgs[3]));
  ASSERT_EQ(train->class_names().size(), 10u);
  EXPECT_EQ(train->class_names()[7], "class_07");
}

TEST_P(CifarFormats, Cifar100FineAndCoarse) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  const int n = 7;
  testing::make_cifar(dir.path, "cifar100", GetParam(), n);
  auto fine = open_dataset("cifar100", dir.path.string(), Split::kTrain);
  DatasetOptions o;
  o.cifar100_labels = "coarse";
  auto coarse = open_dataset("cifar100", dir.path.string(), Split::kTest, o);
  EXPECT_EQ(fine->num_classes(), 100);
  EXPECT_EQ(coarse->num_classes(), 20);
  ASSERT_EQ(fine->size(), n);
  EXPECT_TRUE(torch::equal(fine->in_memory()->first, expected_cifar(1, n)));
  EXPECT_TRUE(torch::equal(coarse->in_memory()->first, expected_cifar(0, n)));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(fine->in_memory()->second[i].item<int64_t>(), testing::cifar_label(1, i, 100));
    EXPECT_EQ(coarse->in_memory()->second[i].item<int64_t>(), testing::cifar_label(0, i, 100) / 5);
  }
  ASSERT_EQ(coarse->class_names().size(), 20u);
  EXPECT_EQ(coarse->class_names()[3], "super_03");
  EXPECT_EQ(fine->class_names()[42], "class_42");
}

INSTANTIATE_TEST_SUITE_P(Data, CifarFormats,
                         ::testing::Values("py2", "py3p2", "py3", "py4", "py5", "bin"));

TEST(DataCifar, TruncatedAndMissingFilesAreClearErrors) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  testing::make_cifar(dir.path, "cifar10", "py2", 4);
  testing::make_cifar(dir.path / "b", "cifar100", "bin", 4);
  const auto py = dir.path / "cifar-10-batches-py";
  const std::string d = dir.path.string();
  // Cut a pickle short: the parse fails and names the file.
  std::string b3 = testing::read_bytes(py / "data_batch_3");
  testing::write_bytes(py / "data_batch_3", b3.substr(0, b3.size() / 2));
  std::string msg, hint;
  EXPECT_EQ(code_of([&] { open_dataset("cifar10", d, Split::kTrain); }, &msg, &hint),
            Code::kDataError);
  EXPECT_NE(msg.find("data_batch_3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(hint.find("gpulab data get cifar10 --dir " + d), std::string::npos) << hint;
  // The test split does not read that file.
  EXPECT_EQ(open_dataset("cifar10", d, Split::kTest)->size(), 4);
  // A missing batch.
  std::filesystem::remove(py / "data_batch_3");
  EXPECT_EQ(code_of([&] { open_dataset("cifar10", d, Split::kTrain); }, &msg), Code::kNotFound);
  EXPECT_NE(msg.find("data_batch_3 is missing"), std::string::npos) << msg;
  // Binary records cut short.
  const auto bin = dir.path / "b" / "cifar-100-binary" / "train.bin";
  std::string tb = testing::read_bytes(bin);
  testing::write_bytes(bin, tb.substr(0, tb.size() - 100));
  EXPECT_EQ(
      code_of([&] { open_dataset("cifar100", (dir.path / "b").string(), Split::kTrain); }, &msg),
      Code::kDataError);
  EXPECT_NE(msg.find("3074-byte records"), std::string::npos) << msg;
}

TEST(DataCifar, WrongDirectorySaysNotFoundWithTheDownloadCommand) {
  TempDir dir;
  std::string msg, hint;
  const std::string missing = (dir.path / "nope").string();
  EXPECT_EQ(code_of([&] { open_dataset("cifar100", missing, Split::kTrain); }, &msg, &hint),
            Code::kNotFound);
  EXPECT_NE(msg.find("Training data not found in " + missing + " directory"), std::string::npos)
      << msg;
  EXPECT_EQ(hint, "download it with: gpulab data get cifar100 --dir " + missing);
  EXPECT_EQ(code_of([&] { open_dataset("cifar10", dir.path.string(), Split::kTest); }, &msg),
            Code::kNotFound);
  EXPECT_NE(msg.find("no cifar-10-batches-py/ or cifar-10-batches-bin/"), std::string::npos);
  EXPECT_EQ(code_of([&] { open_dataset("imagenet21k", dir.path.string(), Split::kTrain); }, &msg),
            Code::kInvalidArgument);
  DatasetOptions o;
  o.cifar100_labels = "medium";
  EXPECT_EQ(code_of([&] { open_dataset("cifar100", dir.path.string(), Split::kTrain, o); }),
            Code::kInvalidArgument);
}

TEST(DataPickle, EveryTruncationOfARealPickleFailsCleanly) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  for (const char* fmt : {"py2", "py4", "py5"}) {
    testing::make_cifar(dir.path / fmt, "cifar10", fmt, 2);
    const std::string full =
        testing::read_bytes(dir.path / fmt / "cifar-10-batches-py" / "data_batch_1");
    ASSERT_TRUE(formats::pickle::parse(full).ok()) << fmt;
    for (size_t cut = 0; cut < full.size(); cut += (cut < 400 ? 1 : 97)) {
      auto r = formats::pickle::parse(std::string_view(full).substr(0, cut));
      EXPECT_FALSE(r.ok()) << fmt << " cut at " << cut;
      if (!r.ok()) {
        EXPECT_EQ(r.error().code, Code::kDataError);
      }
    }
  }
  EXPECT_FALSE(formats::pickle::parse("\x80\x02\xff.").ok());  // unknown opcode
  EXPECT_FALSE(formats::pickle::parse("\x80\x02s.").ok());     // stack underflow
}

// The real Fashion-MNIST of Debian's dataset-fashion-mnist, found without a data folder;
// checked against numpy reading the same files.
TEST(DataIdx, DebianFashionMnistIsFoundAndMatchesNumpy) {
  if (system_fashion_mnist_dir().empty()) GTEST_SKIP() << "dataset-fashion-mnist not installed";
  GPULAB_REQUIRE_PYTHON();
  TempDir empty;
  auto train = open_dataset("fashion_mnist", empty.path.string(), Split::kTrain);
  auto test = open_dataset("fashion-mnist", empty.path.string(), Split::kTest);
  EXPECT_EQ(train->size(), 60000);
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(train->image_shape(), (std::vector<int64_t>{1, 28, 28}));
  EXPECT_EQ(train->class_names()[9], "Ankle boot");
  std::string ref;
  testing::run_python({"-c", R"(
import gzip, numpy as np
d = '/usr/share/datasets/fashion-mnist/'
for split in ('train', 't10k'):
    lab = np.frombuffer(gzip.open(d + split + '-labels-idx1-ubyte.gz').read()[8:], np.uint8)
    img = np.frombuffer(gzip.open(d + split + '-images-idx3-ubyte.gz').read()[16:], np.uint8)
    print(' '.join(str(c) for c in np.bincount(lab, minlength=10)), int(img.astype(np.int64).sum()),
          int(img[784 * 1234: 784 * 1235].astype(np.int64).sum()))
)"},
                      &ref);
  std::istringstream in(ref);
  for (const auto& ds : {train, test}) {
    auto [imgs, labels] = *ds->in_memory();
    auto hist = torch::bincount(labels, {}, 10);
    std::cout << ds->size() << " images, per class:";
    for (int c = 0; c < 10; ++c) {
      int64_t want = 0;
      in >> want;
      std::cout << " " << hist[c].item<int64_t>();
      EXPECT_EQ(hist[c].item<int64_t>(), want) << "class " << c;
    }
    int64_t sum = 0, sum1234 = 0;
    in >> sum >> sum1234;
    std::cout << ", pixel sum " << imgs.sum(torch::kInt64).item<int64_t>() << "\n";
    EXPECT_EQ(imgs.sum(torch::kInt64).item<int64_t>(), sum);
    EXPECT_EQ(imgs[1234].sum(torch::kInt64).item<int64_t>(), sum1234);
  }
}

TEST(DataIdx, GeneratedMnistPlainAndGzippedAndTruncated) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  testing::run_python({"-c", R"(
import gzip, os, struct, sys
root = sys.argv[1]
for sub, gz in (('mnist', False), ('MNIST/raw', True)):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
for split, n in (('train', 12), ('t10k', 5)):
    img = struct.pack('>IIII', 0x803, n, 28, 28) + bytes((i * 3 + k) % 256 for i in range(n) for k in range(784))
    lab = struct.pack('>II', 0x801, n) + bytes((i * 7) % 10 for i in range(n))
    for name, data in ((split + '-images-idx3-ubyte', img), (split + '-labels-idx1-ubyte', lab)):
        open(os.path.join(root, 'mnist', name), 'wb').write(data)
        gzip.open(os.path.join(root, 'MNIST/raw', name + '.gz'), 'wb').write(data)
)",
                       dir.path.string()});
  auto plain = open_dataset("mnist", dir.path.string(), Split::kTrain);
  ASSERT_EQ(plain->size(), 12);
  auto [imgs, labels] = *plain->in_memory();
  EXPECT_EQ(imgs[5][0][1][2].item<int64_t>(), (5 * 3 + 28 + 2) % 256);
  EXPECT_EQ(labels[5].item<int64_t>(), 5);
  // The gzipped copy gives the same data.
  std::filesystem::remove_all(dir.path / "mnist");
  auto gz = open_dataset("mnist", dir.path.string(), Split::kTrain);
  EXPECT_TRUE(torch::equal(gz->in_memory()->first, imgs));
  EXPECT_EQ(open_dataset("mnist", dir.path.string(), Split::kTest)->size(), 5);
  // Truncated gzip: cut the compressed file.
  const auto f = dir.path / "MNIST" / "raw" / "train-images-idx3-ubyte.gz";
  std::string bytes = testing::read_bytes(f);
  testing::write_bytes(f, bytes.substr(0, bytes.size() * 2 / 3));
  std::string msg;
  EXPECT_EQ(code_of([&] { open_dataset("mnist", dir.path.string(), Split::kTrain); }, &msg),
            Code::kDataError);
  EXPECT_NE(msg.find("train-images-idx3-ubyte.gz"), std::string::npos) << msg;
  // Fashion-MNIST without the system fallback: not found, with the download command.
  DatasetOptions o;
  o.use_system_data = false;
  std::string hint;
  EXPECT_EQ(code_of([&] { open_dataset("fashion-mnist", dir.path.string(), Split::kTrain, o); },
                    &msg, &hint),
            Code::kNotFound);
  EXPECT_NE(hint.find("gpulab data get fashion-mnist"), std::string::npos) << hint;
}

TEST(DataIdx, HeaderSizeMismatchIsDetected) {
  TempDir dir;
  std::string img("\x00\x00\x08\x03\x00\x00\x00\x02\x00\x00\x00\x1c\x00\x00\x00\x1c", 16);
  img += std::string(784 + 100, '\x07');  // two images promised, one and a bit present
  std::string lab("\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02", 10);
  testing::write_bytes(dir.path / "train-images-idx3-ubyte", img);
  testing::write_bytes(dir.path / "train-labels-idx1-ubyte", lab);
  std::string msg;
  EXPECT_EQ(code_of([&] { open_dataset("mnist", dir.path.string(), Split::kTrain); }, &msg),
            Code::kDataError);
  EXPECT_NE(msg.find("holds 884 data bytes, its header says 1568"), std::string::npos) << msg;
}

TEST(DataSynthetic, DeterministicFromTheSeed) {
  DatasetOptions o;
  o.synthetic_size = 20;
  o.synthetic_shape = {3, 8, 8};
  o.seed = 7;
  auto a = open_dataset("synthetic", "", Split::kTrain, o);
  auto b = open_dataset("synthetic", "", Split::kTrain, o);
  auto t = open_dataset("synthetic", "", Split::kTest, o);
  EXPECT_TRUE(torch::equal(a->in_memory()->first, b->in_memory()->first));
  EXPECT_TRUE(torch::equal(a->in_memory()->second, b->in_memory()->second));
  EXPECT_FALSE(torch::equal(a->in_memory()->first, t->in_memory()->first));
  o.seed = 8;
  EXPECT_FALSE(torch::equal(a->in_memory()->first,
                            open_dataset("synthetic", "", Split::kTrain, o)->in_memory()->first));
}

}  // namespace
}  // namespace gpulab::train
