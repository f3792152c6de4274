// Tests atomic writes and file helpers against the real file system.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/files.h"

using namespace gpulab;

namespace {
fs::path temp_dir() {
  char tmpl[] = "/tmp/gpulab-core-XXXXXX";
  return fs::path(::mkdtemp(tmpl));
}
}  // namespace

TEST(Files, AtomicWriteReplacesWholeFileAndLeavesNoTemporaries) {
  fs::path d = temp_dir();
  ASSERT_TRUE(write_file_atomic(d / "a.txt", "first").ok());
  ASSERT_TRUE(write_file_atomic(d / "a.txt", "second version").ok());
  EXPECT_EQ(*read_file(d / "a.txt"), "second version");
  int entries = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(d)) ++entries;
  EXPECT_EQ(entries, 1);
  fs::remove_all(d);
}

TEST(Files, AtomicWriteCreatesParentFolders) {
  fs::path d = temp_dir();
  ASSERT_TRUE(write_file_atomic(d / "x" / "y" / "z.bin", std::string("\0\1\2", 3)).ok());
  EXPECT_EQ(read_file(d / "x" / "y" / "z.bin")->size(), 3u);
  fs::remove_all(d);
}

TEST(Files, ReadMissingFileIsNotFound) {
  auto r = read_file("/nonexistent/gpulab/file");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kNotFound);
  EXPECT_NE(r.error().message.find("/nonexistent/gpulab/file"), std::string::npos);
}

TEST(Files, ReadTextTrimsTrailingNewline) {
  fs::path d = temp_dir();
  ASSERT_TRUE(write_file_atomic(d / "v", "gfx942\n").ok());
  EXPECT_EQ(read_text(d / "v").value(), "gfx942");
  EXPECT_FALSE(read_text(d / "missing").has_value());
  fs::remove_all(d);
}

TEST(Files, UnderRootJoinsCapturedTrees) {
  EXPECT_EQ(under_root("", "/sys/class/drm"), fs::path("/sys/class/drm"));
  EXPECT_EQ(under_root("/tmp/cap", "/sys/class/drm"), fs::path("/tmp/cap/sys/class/drm"));
}

TEST(Files, WhichFindsShell) {
  auto sh = which("sh");
  ASSERT_TRUE(sh.has_value());
  EXPECT_FALSE(which("no-such-program-gpulab").has_value());
}
