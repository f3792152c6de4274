// Tar writer and reader against GNU tar, the reference: what we write GNU tar lists and
// extracts byte for byte; what GNU tar writes (ustar, GNU long names, pax) we read back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/files.h"
#include "core/subprocess.h"
#include "core/tar.h"

namespace gpulab {
namespace {

namespace fs = std::filesystem;

class TarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpulab-tar-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  ProcessResult tar(const std::vector<std::string>& args) {
    std::vector<std::string> argv{"tar"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_process(argv);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : ProcessResult{};
  }
  fs::path dir_;
};

// A tar in memory read as a stream (no seek, no size), as the downloader's gzip pipe is; `at`
// counts the bytes consumed.
TarInput stream_of(std::string_view data, std::size_t& at, const char* what) {
  TarInput in;
  in.what = what;
  in.read = [data, &at](char* buf, std::size_t n) {
    if (at + n > data.size()) return false;
    std::memcpy(buf, data.data() + at, n);
    at += n;
    return true;
  };
  return in;
}

std::string long_name() {
  std::string n;
  for (int i = 0; i < 8; ++i) n += "segment-number-" + std::to_string(i) + "/";
  return n + "file-with-a-long-name.txt";  // > 100 bytes
}

TEST_F(TarTest, GnuTarExtractsWhatWeWrite) {
  std::string big(70000, 'x');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
  {
    auto w = TarWriter::create(dir_ / "out.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->add_directory("ctx").ok());
    ASSERT_TRUE(w->add_file("ctx/Dockerfile", "FROM scratch\n").ok());
    ASSERT_TRUE(w->add_file("ctx/run.sh", "#!/bin/sh\necho hi\n", 0755).ok());
    ASSERT_TRUE(w->add_file("ctx/big.bin", big).ok());
    ASSERT_TRUE(w->add_symlink("ctx/link", "run.sh").ok());
    ASSERT_TRUE(w->add_file(long_name(), "long\n").ok());
    ASSERT_TRUE(w->finish().ok());
  }
  auto list = tar({"-tvf", (dir_ / "out.tar").string()});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  fs::create_directories(dir_ / "x");
  auto x = tar({"-xf", (dir_ / "out.tar").string(), "-C", (dir_ / "x").string()});
  ASSERT_EQ(x.exit_code, 0) << x.err;
  EXPECT_EQ(*read_file(dir_ / "x/ctx/Dockerfile"), "FROM scratch\n");
  EXPECT_EQ(*read_file(dir_ / "x/ctx/big.bin"), big);
  EXPECT_EQ(*read_file(dir_ / "x" / long_name()), "long\n");
  EXPECT_EQ(fs::read_symlink(dir_ / "x/ctx/link"), "run.sh");
  EXPECT_TRUE((fs::status(dir_ / "x/ctx/run.sh").permissions() & fs::perms::owner_exec) !=
              fs::perms::none);
}

TEST_F(TarTest, ReadsGnuAndPaxArchives) {
  fs::create_directories(dir_ / "src" / fs::path(long_name()).parent_path());
  std::ofstream(dir_ / "src" / long_name()) << "deep";
  std::ofstream(dir_ / "src/manifest.json") << R"([{"Config":"c.json"}])";
  fs::create_symlink("manifest.json", dir_ / "src/alias");
  for (std::string format : {"gnu", "pax", "ustar"}) {
    fs::path t = dir_ / (format + ".tar");
    auto r = tar({"--format=" + format, "-cf", t.string(), "-C", (dir_ / "src").string(), "."});
    if (format == "ustar") {
      // ustar cannot hold this long name: GNU tar refuses; nothing to read then.
      continue;
    }
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto entries = TarReader::list(t);
    ASSERT_TRUE(entries.ok()) << entries.error().to_string();
    bool saw_long = false, saw_link = false;
    for (const auto& e : *entries) {
      if (e.name == long_name()) saw_long = e.size == 4;
      if (e.name == "alias")
        saw_link = e.type == TarType::kSymlink && e.link_target == "manifest.json";
    }
    EXPECT_TRUE(saw_long) << format;
    EXPECT_TRUE(saw_link) << format;
    auto m = TarReader::read_member(t, "manifest.json");
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    EXPECT_EQ(*m, R"([{"Config":"c.json"}])");
    EXPECT_EQ(TarReader::read_member(t, "absent.json").error().code, Code::kNotFound);
  }
}

TEST_F(TarTest, TruncatedArchiveIsDataError) {
  std::string data(5000, 'z');
  {
    auto w = TarWriter::create(dir_ / "full.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->add_file("a.bin", data).ok());
    ASSERT_TRUE(w->add_file("b.bin", data).ok());
    ASSERT_TRUE(w->finish().ok());
  }
  auto full = *read_file(dir_ / "full.tar");
  ASSERT_TRUE(TarReader::list(dir_ / "full.tar").ok());
  // Cut inside the second file's data, and cut just before the end blocks.
  for (std::size_t cut : {full.size() / 2 + 700, full.size() - 1024}) {
    ASSERT_TRUE(write_file_atomic(dir_ / "cut.tar", std::string_view(full).substr(0, cut)).ok());
    auto r = TarReader::list(dir_ / "cut.tar");
    ASSERT_FALSE(r.ok()) << "cut at " << cut;
    EXPECT_EQ(r.error().code, Code::kDataError);
  }
  ASSERT_TRUE(write_file_atomic(dir_ / "junk.tar", std::string(2048, 'j')).ok());
  EXPECT_EQ(TarReader::list(dir_ / "junk.tar").error().code, Code::kDataError);
}

// A member's name may hold any byte (pax and GNU long names do); a refusal naming it stays one
// line (found by tests/fuzz/tar_fuzz.cpp: a pax path spanning the records after it).
TEST_F(TarTest, ADamagedMembersNameWithANewlineStaysOnOneLine) {
  {
    auto w = TarWriter::create(dir_ / "full.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->add_file("data/evil\n30 atime=1\x1b[2J.bin", std::string(5000, 'z')).ok());
    ASSERT_TRUE(w->finish().ok());
  }
  auto full = *read_file(dir_ / "full.tar");
  ASSERT_TRUE(write_file_atomic(dir_ / "cut.tar", std::string_view(full).substr(0, 3000)).ok());
  auto r = TarReader::list(dir_ / "cut.tar");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kDataError);
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("data/evil\\n30 atime=1\\x1b[2J.bin"), std::string::npos)
      << r.error().message;
}

TEST_F(TarTest, AddTreeKeepsLayout) {
  fs::create_directories(dir_ / "tree/a/b");
  std::ofstream(dir_ / "tree/a/b/f.txt") << "leaf";
  std::ofstream(dir_ / "tree/top.txt") << "top";
  {
    auto w = TarWriter::create(dir_ / "tree.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->add_tree(dir_ / "tree", "root").ok());
    ASSERT_TRUE(w->finish().ok());
  }
  auto r = tar({"-tf", (dir_ / "tree.tar").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("root/a/b/f.txt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("root/top.txt"), std::string::npos) << r.out;
  EXPECT_EQ(*TarReader::read_member(dir_ / "tree.tar", "root/a/b/f.txt"), "leaf");
}

// A stream (no seek, no size: a gzip stream in the data downloader) reads as a file does, and its
// truncation is a data error too.
TEST_F(TarTest, ReadsAStreamAndCopiesEntries) {
  fs::create_directories(dir_ / "src/sub");
  std::string big(200000, 'q');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i * 7 % 26);
  std::ofstream(dir_ / "src/sub/big.bin") << big;
  std::ofstream(dir_ / "src/small.txt") << "small";
  auto r =
      tar({"--format=pax", "-cf", (dir_ / "s.tar").string(), "-C", (dir_ / "src").string(), "."});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bytes = *read_file(dir_ / "s.tar");
  auto read_stream = [&](std::string_view data, std::map<std::string, std::string>& got) {
    std::size_t at = 0;
    TarInput in = stream_of(data, at, "stream");
    Status copied = ok_status();  // a short read shows in the entry's copy or in the headers
    Status st = TarReader::for_each(in, [&](const TarEntry& e, const TarReader::EntryData& d) {
      if (e.type != TarType::kFile) return true;
      std::string out;
      copied = d.copy([&](const char* p, std::size_t n) {
        out.append(p, n);
        return ok_status();
      });
      got[e.name] = out;
      return copied.ok();
    });
    return copied.ok() ? st : copied;
  };
  std::map<std::string, std::string> got;
  ASSERT_TRUE(read_stream(bytes, got).ok());
  EXPECT_EQ(got["sub/big.bin"], big);
  EXPECT_EQ(got["small.txt"], "small");
  got.clear();
  auto cut = read_stream(std::string_view(bytes).substr(0, bytes.size() / 2), got);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code, Code::kDataError);
}

// A pax record may say any size; a negative or overflowing one is refused as damage, before a
// reader sizes a buffer by it (found by tests/fuzz/tar_fuzz.cpp's kind of input).
TEST(TarHostile, NegativeAndHugePaxSizesAreRefused) {
  for (const std::string size : {"-512", "99999999999999999999"}) {
    const std::string rec = "size=" + size + "\n";
    const std::string record = std::to_string(rec.size() + 3) + " " + rec;
    ASSERT_LT(record.size(), 100u);
    TarEntry pax;
    pax.name = "PaxHeaders/a";
    pax.size = static_cast<std::int64_t>(record.size());
    auto block = tar_header_block(pax);
    block[156] = 'x';
    std::memset(block.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : block) sum += static_cast<unsigned char>(c);
    std::snprintf(block.data() + 148, 8, "%06o", sum);
    std::string bytes(block.data(), block.size());
    bytes += record + std::string(512 - record.size(), '\0');
    TarEntry file;
    file.name = "a";
    auto fb = tar_header_block(file);
    bytes += std::string(fb.data(), fb.size()) + std::string(1024, '\0');
    std::size_t at = 0;
    TarInput in = stream_of(bytes, at, "hostile");
    Status st = TarReader::for_each(in, [&](const TarEntry&, const TarReader::EntryData& d) {
      (void)d.read(1 << 20);
      return true;
    });
    ASSERT_FALSE(st.ok()) << size;
    EXPECT_EQ(st.error().code, Code::kDataError);
    EXPECT_NE(st.error().message.find("a declares a size of"), std::string::npos)
        << st.error().message;
  }
}

// The one check every unpacker of archives from elsewhere makes on a member's name.
TEST(TarHostile, MemberNamesThatLeaveTheFolderAreRefused) {
  using Parts = std::vector<std::string>;
  EXPECT_EQ(tar_member_parts("a/b/c"), Parts({"a", "b", "c"}));
  EXPECT_EQ(tar_member_parts("./a//b/"), Parts({"a", "b"}));
  EXPECT_EQ(tar_member_parts("a/./b"), Parts({"a", "b"}));
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a/..", ".", "./", "//"})
    EXPECT_FALSE(tar_member_parts(bad).has_value()) << "'" << bad << "'";
}

}  // namespace
}  // namespace gpulab
