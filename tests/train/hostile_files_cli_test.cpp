// Hostile files through the real binary (issue 30 item 1): a data set file or config.json whose
// header claims far more than the file holds ends with one error naming the file, exit 2, no
// signal and no attempt to allocate what it claims. The parsers themselves are fuzzed in
// tests/fuzz; this checks the trainer's path from the file to the error line.
#include <gtest/gtest.h>

#include <fstream>

#include "core/files.h"
#include "data_test_util.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

using namespace std::string_literals;

void expect_file_error(const ProcessResult& r, const fs::path& file, const std::string& what) {
  EXPECT_EQ(r.signal, 0) << "crashed: " << r.err;
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const auto line = r.err.find("error: ");
  ASSERT_NE(line, std::string::npos) << r.err;
  const std::string first = r.err.substr(line, r.err.find('\n', line) - line);
  EXPECT_NE(first.find(file.string()), std::string::npos) << r.err;
  EXPECT_NE(first.find(what), std::string::npos) << r.err;
  std::printf("[hostile] %s\n", first.c_str());
}

TEST(HostileFilesCli, IdxHeaderClaimingFourBillionImages) {
  const auto dir = testing::temp_dir("hostile_idx");
  fs::create_directories(dir / "mnist");
  // Plain IDX: a header promising 2^32 - 1 images of 28×28 over 16 bytes of data.
  const auto img = dir / "mnist" / "train-images-idx3-ubyte";
  std::ofstream(img, std::ios::binary)
      << "\x00\x00\x08\x03\xff\xff\xff\xff\x00\x00\x00\x1c\x00\x00\x00\x1c"s
      << std::string(16, 'x');
  std::ofstream(dir / "mnist" / "train-labels-idx1-ubyte", std::ios::binary)
      << "\x00\x00\x08\x01\x00\x00\x00\x01\x00"s;
  expect_file_error(testing::run_gpulab({"train", "--model", "resnet18", "--dataset", "mnist",
                                         "--data_dir", dir.string(), "--num_epochs", "1"}),
                    img, "holds 16 data bytes, its header says 3367254359280");
  fs::remove_all(dir);
}

TEST(HostileFilesCli, CifarPickleWithALabelOutsideTheClasses) {
  GPULAB_REQUIRE_PYTHON();
  const auto dir = testing::temp_dir("hostile_cifar");
  const auto batches = dir / "cifar-10-batches-py";
  fs::create_directories(batches);
  testing::run_python({"-c", R"(
import numpy as np, pickle, sys
d = {b'data': np.zeros((2, 3072), np.uint8), b'labels': [3, 200]}
for name in ['data_batch_%d' % i for i in range(1, 6)] + ['test_batch']:
    pickle.dump(d, open(sys.argv[1] + '/' + name, 'wb'), protocol=2)
)",
                       batches.string()});
  expect_file_error(testing::run_gpulab({"train", "--model", "resnet18", "--dataset", "cifar10",
                                         "--data_dir", dir.string(), "--num_epochs", "1"}),
                    batches / "data_batch_1", "label 200 of image 1 is outside 0..9");
  fs::remove_all(dir);
}

TEST(HostileFilesCli, ConfigJsonWithAFloatSize) {
  const auto dir = testing::temp_dir("hostile_config");
  const auto cfg = dir / "config.json";
  std::ofstream(cfg) << R"({"hidden_size": 1e300, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 172, "vocab_size": 512, "max_position_embeddings": 256,
    "rms_norm_eps": 1e-6})";
  expect_file_error(testing::run_gpulab({"plan", "--model", cfg.string(), "--gpus", "1"}), cfg,
                    "lacks integer or numeric field(s): hidden_size");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
