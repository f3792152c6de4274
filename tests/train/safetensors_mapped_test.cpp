// Reading a safetensors file maps it (core/mapped_file.h): the tensors are views of the file's
// pages, so a reader that takes one tensor of a large file (a pipeline stage, a TP rank's slice)
// holds that one in its own memory, not the file twice over as a whole read and copy did; they
// are writable without changing the file, and a tensor whose data is not aligned for its dtype is
// copied instead of viewed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <fstream>
#include <string>

#include "core/files.h"
#include "support/temp_dir.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

// This process's anonymous resident memory (heap, copies), from /proc/self/status; file pages
// it maps are counted apart (RssFile).
double rss_anon_mb() {
  std::ifstream f("/proc/self/status");
  std::string key;
  double kb = 0;
  while (f >> key) {
    if (key == "RssAnon:") {
      f >> kb;
      return kb / 1024;
    }
    f.ignore(1 << 12, '\n');
  }
  return -1;
}

TEST(SafetensorsMapped, AReaderHoldsOnlyWhatItTakesAndTheFileStaysAsWritten) {
  gpulab::testing::TempDir dir("mapped");
  const auto file = dir.path / "w.safetensors";
  constexpr int64_t kN = 4 << 20;  // 16 MiB of fp32 a tensor, 64 MiB in all
  {
    StateDict w;
    for (int i = 0; i < 4; ++i) w["t" + std::to_string(i)] = torch::full({kN}, 1.0f + i);
    ASSERT_TRUE(write_safetensors(file, w).ok());
  }
  const double before = rss_anon_mb();
  ASSERT_GT(before, 0) << "no RssAnon in /proc/self/status";
  auto read = read_safetensors(file);
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  const double after_read = rss_anon_mb();
  // A whole read grew by 64 MiB (every tensor copied out of the bytes it read).
  EXPECT_LT(after_read - before, 8.0) << "RssAnon " << before << " -> " << after_read << " MiB";
  const torch::Tensor taken = read->tensors.at("t2").clone();
  const double after_take = rss_anon_mb();
  EXPECT_NEAR(after_take - after_read, 16.0, 4.0) << "one 16 MiB tensor taken";
  std::printf(
      "[ figures  ] RssAnon %.1f MiB, after mapping a 64 MiB file %.1f, after taking one "
      "16 MiB tensor %.1f\n",
      before, after_read, after_take);
  EXPECT_EQ(taken.sum().item<double>(), 3.0 * kN);

  // Writable in place; the file keeps its bytes (a fresh read sees them).
  read->tensors.at("t0").mul_(5);
  EXPECT_EQ(read->tensors.at("t0")[7].item<float>(), 5.0f);
  auto again = read_safetensors(file);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tensors.at("t0")[7].item<float>(), 1.0f);
  // The tensors outlive the file object they came from.
  torch::Tensor kept = read->tensors.at("t3");
  read = Error{Code::kInternal, "dropped"};
  EXPECT_EQ(kept[kN - 1].item<float>(), 4.0f);
}

// An F32 tensor at an offset that is not a multiple of 4 (after a 3-byte U8 one), as a
// hand-made file may have it: copied, its values exact.
TEST(SafetensorsMapped, UnalignedDataIsCopied) {
  gpulab::testing::TempDir dir("mapped");
  const std::string json = R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]},)"
                           R"("b":{"dtype":"F32","shape":[2],"data_offsets":[3,11]}})";
  std::string bytes(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += json;
  bytes += std::string("\x01\x02\x03", 3);
  const float b[2] = {1.5f, -2.25f};
  bytes.append(reinterpret_cast<const char*>(b), sizeof b);
  ASSERT_TRUE(write_file_atomic(dir.path / "odd.safetensors", bytes).ok());
  auto read = read_safetensors(dir.path / "odd.safetensors");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(read->tensors.at("a")[2].item<int>(), 3);
  EXPECT_EQ(read->tensors.at("b")[0].item<float>(), 1.5f);
  EXPECT_EQ(read->tensors.at("b")[1].item<float>(), -2.25f);
  // "a" (U8: any address will do) is a view of the mapping, so a view of "b" would sit 3 bytes
  // after it; the copy is an allocation of its own, aligned.
  const auto* a_at = static_cast<const char*>(read->tensors.at("a").data_ptr());
  const auto* b_at = static_cast<const char*>(read->tensors.at("b").data_ptr());
  EXPECT_NE(b_at, a_at + 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b_at) % alignof(float), 0u);
}

}  // namespace
}  // namespace gpulab::train
