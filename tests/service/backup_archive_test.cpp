// Backup file format: round trip, checksum verification, corruption/truncation detection, and a
// full disk (one error naming the file and the space it needed, nothing left behind).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "service/base/crypto.h"
#include "service/ops/backups/backup_archive.h"
#include "support/small_tmpfs.h"
#include "support/temp_dir.h"

namespace gpulab::service {
namespace {

using gpulab::testing::TempDir;

std::string write_backup(const std::filesystem::path& dir, const std::string& payload) {
  std::string path = (dir / "backup_t.tar").string();
  auto w = BackupWriter::create(path);
  EXPECT_TRUE(w.ok());
  // Written in uneven pieces, as the engine's stream delivers them.
  for (size_t i = 0; i < payload.size(); i += 777)
    EXPECT_TRUE((*w)->write(payload.data() + i, std::min<size_t>(777, payload.size() - i)).ok());
  BackupManifest m;
  m.name = "t";
  m.source = "box";
  m.image = "gpulab-backup:t";
  m.spec.gpu_count = 2;
  m.spec.memory = SizeLimit{"1g", 1ll << 30};
  EXPECT_TRUE((*w)->finish(m).ok());
  EXPECT_EQ(m.image_sha256, sha256_hex(payload));
  return path;
}

TEST(BackupArchive, RoundTrip) {
  TempDir d;
  std::string payload = random_secret(100000);
  auto path = write_backup(d.path, payload);
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
  auto m = read_backup(path, true);
  ASSERT_TRUE(m.ok()) << m.error().to_string();
  EXPECT_EQ(m->image_bytes, static_cast<std::int64_t>(payload.size()));
  EXPECT_EQ(m->spec.gpu_count, 2);
  std::string back;
  ASSERT_TRUE(read_image_member(path, *m, [&](const char* p, size_t n) {
                back.append(p, n);
                return ok_status();
              }).ok());
  EXPECT_EQ(back, payload);
  // The file is a standard tar: tar itself lists both members.
  std::string cmd = "tar -tf " + path + " > " + (d.path / "list.txt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream list(d.path / "list.txt");
  std::string a, b;
  list >> a >> b;
  EXPECT_EQ(a, "image.tar");
  EXPECT_EQ(b, "gpulab-backup.json");
}

TEST(BackupArchive, FlippedByteIsDetected) {
  TempDir d;
  auto path = write_backup(d.path, random_secret(50000));
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(512 + 20000);
    f.put('#');
  }
  ASSERT_TRUE(read_backup(path, false).ok());  // layout still fine
  auto m = read_backup(path, true);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, Code::kDataError);
  EXPECT_NE(m.error().message.find("SHA-256"), std::string::npos);
}

TEST(BackupArchive, TruncatedOrForeignFilesAreRefused) {
  TempDir d;
  auto path = write_backup(d.path, random_secret(50000));
  std::filesystem::resize_file(path, 30000);
  auto m = read_backup(path, true);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, Code::kDataError);
  std::string junk = (d.path / "junk.tar").string();
  std::ofstream(junk) << std::string(4096, 'x');
  EXPECT_EQ(read_backup(junk, true).error().code, Code::kDataError);
  EXPECT_EQ(read_backup((d.path / "none.tar").string(), true).error().code, Code::kNotFound);
}

// A backup folder that fills up during the write: the write fails as a full disk, naming the
// backup and what it needed, and abandoning leaves no .partial file.
TEST(BackupArchive, FullDiskIsOneErrorAndLeavesNothing) {
  gpulab::testing::SmallTmpfs disk(1 << 20);
  if (!disk.why_not.empty()) GTEST_SKIP() << disk.why_not;
  const std::string path = (disk.path / "backup_full.tar").string();
  auto w = BackupWriter::create(path);
  ASSERT_TRUE(w.ok()) << w.error().message;
  (*w)->expect_bytes(3 << 20);
  const std::string chunk(64 << 10, 'x');
  Status st = ok_status();
  for (int i = 0; i < 64 && st.ok(); ++i) st = (*w)->write(chunk.data(), chunk.size());
  ASSERT_FALSE(st.ok()) << "1 MiB took 4 MiB";
  EXPECT_EQ(st.error().code, Code::kResourceExhausted);
  EXPECT_NE(st.error().message.find(path), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("needs 3145728 bytes"), std::string::npos)
      << st.error().message;
  (*w)->abandon();
  EXPECT_TRUE(disk.names(disk.path).empty());
}

}  // namespace
}  // namespace gpulab::service
