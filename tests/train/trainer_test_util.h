// Helpers shared by the trainer tests: run the built gpulab CLI, make small CIFAR-100 files in
// the Python (pickle) format, find the system Fashion-MNIST, and read a run's epoch records.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "core/json.h"
#include "core/subprocess.h"
#include "train/data/datasets.h"
#include "train/data/sources.h"

namespace gpulab::train::testing {

namespace fs = std::filesystem;

inline ProcessResult run_gpulab(std::vector<std::string> args, int timeout_s = 300,
                                std::map<std::string, std::string> env = {}) {
  // Built front to back: inserting at begin() trips a GCC 12 -Warray-bounds false positive.
  std::vector<std::string> argv{std::string(GPULAB_BINARY)};
  argv.insert(argv.end(), std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end()));
  RunOptions ro;
  ro.timeout = std::chrono::seconds(timeout_s);
  ro.env_add = std::move(env);
  auto r = run_process(argv, ro);
  EXPECT_TRUE(r.ok()) << "cannot start " << GPULAB_BINARY;
  return r ? *r : ProcessResult{};
}

// The "epoch" records of a run's metrics.jsonl (run_dir/metrics.jsonl), in order.
inline std::vector<Json> epoch_records(const fs::path& run_dir) {
  std::vector<Json> out;
  std::ifstream in(run_dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = Json::parse(line);  // a line that is not JSON throws: the test fails
    if (j.value("type", "") == "epoch") out.push_back(std::move(j));
  }
  return out;
}

// The folders temp_dir made, removed when the test process exits (ctest runs one test a
// process): runs and data sets of hundreds of MB each had piled up in /tmp, run after run. Only
// in the process that made them: a forked child that exits must not delete its parent's folders.
// A failed test's folders stay for a look, and are named on stderr.
struct TrainerTempDirs {
  std::vector<fs::path> paths;
  ~TrainerTempDirs() {
    const auto* unit = ::testing::UnitTest::GetInstance();
    const bool keep = unit->failed_test_count() > 0;
    for (const auto& p : paths) {
      if (keep) {
        std::fprintf(stderr, "kept for the failed test: %s\n", p.c_str());
        continue;
      }
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  }
};
inline void remove_at_exit(const fs::path& p) {
  static const pid_t owner = ::getpid();
  static TrainerTempDirs made;
  if (::getpid() == owner) made.paths.push_back(p);
}

// A fresh folder under the test temp dir, removed when the test process exits.
// Flips one bit of the byte `from_end` bytes before the end of `file` (damage a checksum sees).
inline void flip_byte_from_end(const fs::path& file, std::streamoff from_end) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-from_end, std::ios::end);
  char b = 0;
  f.read(&b, 1);
  b = static_cast<char>(b ^ 0x10);
  f.seekp(-from_end, std::ios::end);
  f.write(&b, 1);
}

inline fs::path temp_dir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("gpulab_trainer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  remove_at_exit(p);
  return p;
}

// Writes CIFAR files in the Python (pickle) format the real sets use (numpy uint8 N×3072
// "data" plus label lists), with random images: cifar-100-python/{train,test,meta} for 100
// classes, cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta} for 10. Needs
// Debian's python3 with numpy (the reference interpreter); false if it is missing.
inline bool make_cifar(const fs::path& data_dir, int classes, int n_train, int n_test) {
  const std::string script = R"(
import numpy as np, pickle, os, sys
out, classes, n_train, n_test = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
def batch(n, key):
    return {b'batch_label': b'x', b'filenames': [b'x.png'] * n, key: [int(i % classes) for i in range(n)],
            b'coarse_labels': [int(i % 20) for i in range(n)],
            b'data': rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)}
def dump(obj, *path):
    with open(os.path.join(*path), 'wb') as f: pickle.dump(obj, f, protocol=2)
if classes == 100:
    root = os.path.join(out, 'cifar-100-python'); os.makedirs(root, exist_ok=True)
    dump(batch(n_train, b'fine_labels'), root, 'train'); dump(batch(n_test, b'fine_labels'), root, 'test')
    dump({b'fine_label_names': [b'c%d' % i for i in range(100)],
          b'coarse_label_names': [b'k%d' % i for i in range(20)]}, root, 'meta')
else:
    root = os.path.join(out, 'cifar-10-batches-py'); os.makedirs(root, exist_ok=True)
    for i in range(1, 6): dump(batch(n_train // 5, b'labels'), root, 'data_batch_%d' % i)
    dump(batch(n_test, b'labels'), root, 'test_batch')
    dump({b'label_names': [b'c%d' % i for i in range(10)], b'num_cases_per_batch': n_train // 5}, root, 'batches.meta')
)";
  if (!fs::exists("/usr/bin/python3")) return false;
  auto r = run_process({"/usr/bin/python3", "-c", script, data_dir.string(),
                        std::to_string(classes), std::to_string(n_train), std::to_string(n_test)});
  return r && r->success();
}

inline bool have_fashion_mnist() {
  return !system_fashion_mnist_dir().empty();
}

}  // namespace gpulab::train::testing
