// A backup into a backup folder that is full (a small tmpfs, the service's real backup path): the
// request fails with 507 INSUFFICIENT_STORAGE naming the backup file and the space it needed,
// the backup made before it is kept byte for byte and still listed, no partial file is left, and
// the failed one is listed as failed with the reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "service/base/crypto.h"
#include "service_env.h"
#include "support/small_tmpfs.h"

namespace gpulab::service::testing {
namespace {

namespace fs = std::filesystem;

class BackupDiskFull : public ServiceTest {};

TEST_F(BackupDiskFull, FullBackupFolderIs507AndKeepsTheGoodBackup) {
  gpulab::testing::SmallTmpfs disk(64 << 20);
  if (!disk.why_not.empty()) GTEST_SKIP() << disk.why_not;
  fs::create_symlink(disk.path, dir_ / "backups");  // the service's backup_dir, on the tmpfs
  start_service(four_gpu_config(engine_->host, unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  HttpClient c(svc_->url());
  const std::string box = prefix_ + "-box";
  auto made = c.post_json(api + "/create", {{"name", box}, {"image", kBoxImage}, {"gpu_count", 0}});
  ASSERT_TRUE(ok(made)) << made.body;
  const std::string good = prefix_ + "-good";
  auto first = c.post_json(api + "/backup", {{"name", box}, {"backup_name", good}});
  ASSERT_TRUE(ok(first)) << first.body;
  const fs::path good_file = disk.path / ("backup_" + good + ".tar");
  const auto good_sha = sha256_file(good_file.string()).value_or_throw();
  const auto good_size = fs::file_size(good_file);

  disk.fill(good_size / 2);  // less room than another backup of the same container takes
  const std::set<std::string> before = [&] {
    auto v = disk.names(disk.path);
    return std::set<std::string>(v.begin(), v.end());
  }();
  const std::string full = prefix_ + "-full";
  auto second = c.post_json(api + "/backup", {{"name", box}, {"backup_name", full}});
  std::printf("backup into a full folder -> HTTP %ld %s: %s\n", second.status, code(second).c_str(),
              second.json().value("message", std::string()).c_str());
  EXPECT_EQ(second.status, 507) << second.body;
  EXPECT_EQ(code(second), "INSUFFICIENT_STORAGE") << second.body;
  const std::string message = second.json().value("message", std::string());
  EXPECT_NE(message.find("backup_" + full + ".tar"), std::string::npos) << message;
  EXPECT_NE(message.find("it needs"), std::string::npos) << message;

  const auto after = disk.names(disk.path);
  EXPECT_EQ(std::set<std::string>(after.begin(), after.end()), before) << "a partial file is left";
  EXPECT_EQ(sha256_file(good_file.string()).value_or_throw(), good_sha);
  auto list = c.get(api + "/backups");
  ASSERT_TRUE(ok(list)) << list.body;
  // The failed one is listed as failed with its reason (a retry may reuse the name).
  const Json listed = list.json();
  std::string good_state, full_state;
  for (const auto& b : listed["data"]["backups"]) {
    if (b.value("backup_name", std::string()) == good) good_state = b.value("state", "");
    if (b.value("backup_name", std::string()) == full) full_state = b.value("state", "");
  }
  EXPECT_EQ(good_state, "complete") << list.body;
  EXPECT_EQ(full_state, "failed") << list.body;
  fs::remove(dir_ / "backups");  // the symlink; the tmpfs goes with `disk`
}

}  // namespace
}  // namespace gpulab::service::testing
