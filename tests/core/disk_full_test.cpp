// A full disk for real (a small tmpfs): atomic writes fail before writing, with the path and the
// bytes needed, keep the file they would replace, and leave no temporary behind.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/atomic_file.h"
#include "core/files.h"
#include "support/small_tmpfs.h"

namespace gpulab {
namespace {

TEST(DiskFull, AtomicWriteNamesThePathAndSizeAndKeepsTheOldFile) {
  testing::SmallTmpfs disk(1 << 20);
  if (!disk.why_not.empty()) GTEST_SKIP() << disk.why_not;
  const auto file = disk.path / "shard-0-of-2.pt";
  ASSERT_TRUE(write_file_atomic(file, std::string(1000, 'a')).ok());
  disk.fill(64 << 10);
  const std::string big(256 << 10, 'b');
  auto st = write_file_atomic(file, big);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Code::kResourceExhausted);
  const std::string& m = st.error().message;
  EXPECT_NE(m.find("not enough disk space for " + file.string()), std::string::npos) << m;
  EXPECT_NE(m.find("it needs 262144 bytes"), std::string::npos) << m;
  EXPECT_NE(m.find("free"), std::string::npos) << m;
  EXPECT_EQ(*read_file(file), std::string(1000, 'a'));
  auto names = disk.names(disk.path);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"filler", "shard-0-of-2.pt"}));
}

TEST(DiskFull, PiecewiseWritesWithoutAReservationSayTheDiskIsFull) {
  testing::SmallTmpfs disk(1 << 20);
  if (!disk.why_not.empty()) GTEST_SKIP() << disk.why_not;
  disk.fill(64 << 10);
  {
    auto f = AtomicFile::create(disk.path / "weights.safetensors");
    ASSERT_TRUE(f.ok());
    Status st = ok_status();
    for (int i = 0; i < 64 && st.ok(); ++i) st = f->write(std::string(16 << 10, 'w'));
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, Code::kResourceExhausted);
    EXPECT_NE(st.error().message.find((disk.path / "weights.safetensors").string()),
              std::string::npos)
        << st.error().message;
  }  // not committed: the temporary goes
  EXPECT_EQ(disk.names(disk.path), (std::vector<std::string>{"filler"}));
}

}  // namespace
}  // namespace gpulab
