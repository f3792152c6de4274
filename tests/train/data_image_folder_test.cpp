// ImageFolder: PNG and JPEG decoding against PIL, the resize against torchvision's Resize on
// uint8 tensors, and the errors for a missing class, an empty class and an undecodable file.
#include <gtest/gtest.h>

#include "core/error.h"
#include "data_test_util.h"
#include "train/data/datasets.h"
#include "train/data/loader.h"

namespace gpulab::train {
namespace {

using testing::TempDir;

// Writes <root>/{train,test}/{cat,dog}/ images with PIL, and the reference decode (PIL) and
// resize (torchvision, antialias off) of train/cat/0.png and train/dog/0.jpg as raw uint8.
const char* kMakeFolder = R"(
import os, sys, numpy as np, torch
from PIL import Image
import torchvision.transforms.functional as TF
root, size = sys.argv[1], int(sys.argv[2])
rng = np.random.RandomState(3)
for split in ('train', 'test'):
    for c, cls in enumerate(('cat', 'dog')):
        d = os.path.join(root, split, cls)
        os.makedirs(d)
        for i in range(3):
            h, w = 20 + 3 * i + c, 30 - 2 * i
            a = rng.randint(0, 256, (h, w, 3)).astype(np.uint8)
            ext = 'png' if cls == 'cat' else 'jpg'
            Image.fromarray(a).save(os.path.join(d, '%d.%s' % (i, ext)), quality=95)
for name in ('train/cat/0.png', 'train/dog/0.jpg'):
    a = np.asarray(Image.open(os.path.join(root, name)).convert('RGB'))
    t = torch.from_numpy(a.copy()).permute(2, 0, 1).contiguous()
    r = TF.resize(t, [size, size], antialias=False)
    base = os.path.join(root, name.replace('/', '_'))
    open(base + '.decoded', 'wb').write(t.numpy().tobytes())
    open(base + '.resized', 'wb').write(r.numpy().tobytes())
)";

torch::Tensor raw(const std::filesystem::path& p, std::vector<int64_t> shape) {
  std::string b = testing::read_bytes(p);
  return torch::from_blob(b.data(), shape, torch::kUInt8).clone();
}

TEST(DataImageFolder, DecodesAndResizesLikePilAndTorchvision) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  const int64_t size = 24;
  testing::run_python({"-c", kMakeFolder, dir.path.string(), std::to_string(size)});
  DatasetOptions o;
  o.image_size = size;
  auto train = open_dataset("imagefolder", dir.path.string(), Split::kTrain, o);
  auto test = open_dataset("imagefolder", dir.path.string(), Split::kTest, o);
  ASSERT_EQ(train->size(), 6);
  EXPECT_EQ(test->size(), 6);
  EXPECT_EQ(train->num_classes(), 2);
  EXPECT_EQ(train->class_names(), (std::vector<std::string>{"cat", "dog"}));
  EXPECT_FALSE(train->in_memory().has_value());
  auto out = torch::empty({3, size, size}, torch::kUInt8);
  // PNG is lossless: decode and resize match torchvision exactly.
  EXPECT_EQ(train->get(0, out), 0);
  auto want = raw(dir.path / "train_cat_0.png.resized", {3, size, size});
  EXPECT_TRUE(torch::equal(out, want)) << (out.to(torch::kInt) - want.to(torch::kInt)).abs().max();
  // JPEG: libjpeg-turbo here and PIL may differ by a unit in a few pixels.
  EXPECT_EQ(train->get(3, out), 1);
  auto jwant = raw(dir.path / "train_dog_0.jpg.resized", {3, size, size});
  auto diff = (out.to(torch::kInt) - jwant.to(torch::kInt)).abs();
  EXPECT_LE(diff.max().item<int>(), 2);
  EXPECT_LT(diff.to(torch::kFloat).mean().item<float>(), 0.2f);
}

TEST(DataImageFolder, MissingOrEmptyClassAndBadFileAreErrors) {
  GPULAB_REQUIRE_PYTHON();
  TempDir dir;
  testing::run_python({"-c", kMakeFolder, dir.path.string(), "16"});
  DatasetOptions o;
  o.image_size = 16;
  std::filesystem::remove_all(dir.path / "test" / "dog");
  try {
    open_dataset("imagefolder", dir.path.string(), Split::kTest, o);
    FAIL() << "missing class accepted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kNotFound);
    EXPECT_NE(std::string(e.what()).find("class 'dog'"), std::string::npos) << e.what();
  }
  for (const auto& f : std::filesystem::directory_iterator(dir.path / "train" / "cat"))
    std::filesystem::remove(f.path());
  try {
    open_dataset("imagefolder", dir.path.string(), Split::kTrain, o);
    FAIL() << "empty class accepted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kNotFound);
    EXPECT_NE(std::string(e.what()).find("holds no JPEG or PNG"), std::string::npos) << e.what();
  }
  // A file that is not an image fails in the worker; the loader rethrows it to the consumer.
  testing::write_bytes(dir.path / "train" / "cat" / "broken.jpg", "\xff\xd8 not a jpeg");
  auto ds = open_dataset("imagefolder", dir.path.string(), Split::kTrain, o);
  LoaderOptions lo;
  lo.batch_size = 2;
  lo.num_workers = 2;
  lo.transform.input_size = 16;
  DataLoader loader(ds, std::make_shared<SequentialSampler>(ds->size()), lo);
  loader.start_epoch(0);
  try {
    while (loader.next()) {
    }
    FAIL() << "broken image accepted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kDataError);
    EXPECT_NE(std::string(e.what()).find("broken.jpg"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpulab::train
