// Backup restores in a lab service, on three fake hosts (fake_lab.h; lab1 2 GPUs, lab2 4, lab3 2:
// where a restore lands is placement, which needs no Docker engine): a restore goes to the host
// it names, else where placement puts it (the host with room for its GPUs), and its image is
// loaded there only; a restore no host has room for loads nothing anywhere.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_lab.h"
#include "service/base/crypto.h"
#include "service/ops/images/internal_images.h"

namespace gpulab::service::testing {
namespace {

const std::vector<std::string> kHosts = {"lab1", "lab2", "lab3"};

class HostsBackup : public ::testing::Test {
 protected:
  // Engines (by index) holding this test's backup image.
  std::vector<int> engines_with_backup_image() {
    std::vector<int> out;
    for (int i = 0; i < 3; ++i)
      if (lab_.engine(kHosts[i]).image_exists(std::string(kBackupRepo) + backup_)) out.push_back(i);
    return out;
  }
  bool on_engine(int i, const std::string& name) {
    return lab_.engine(kHosts[i]).inspect_container(name).ok();
  }
  HttpResult restore(const LabClient& c, const std::string& name, int gpus,
                     const std::string& host) {
    Json body = {
        {"backup_path", "backup_" + backup_ + ".tar"}, {"name", name}, {"gpu_count", gpus}};
    if (!host.empty()) body["host"] = host;
    return c.post_json(kApi + "/restore", body);
  }
  FakeLab lab_{{{"lab1", 2}, {"lab2", 4}, {"lab3", 2}}};
  const std::string backup_ = "bk" + random_secret(6);
};

TEST_F(HostsBackup, RestoreGoesToTheAskedHostOrWhereItsGpusFit) {
  LabClient c(lab_, "");
  auto src =
      c.post_json(kApi + "/create",
                  {{"name", "src"}, {"image", kFakeImage}, {"gpu_count", 0}, {"host", "lab1"}});
  ASSERT_TRUE(ok(src)) << src.body;
  auto b = c.post_json(kApi + "/backup", {{"name", "src"}, {"backup_name", backup_}});
  ASSERT_TRUE(ok(b)) << b.body;
  EXPECT_TRUE(engines_with_backup_image().empty());  // the backup is the file

  auto asked = restore(c, "on3", 0, "lab3");
  ASSERT_TRUE(ok(asked)) << asked.body;
  EXPECT_EQ(asked.json()["data"]["host"], "lab3");
  EXPECT_TRUE(on_engine(2, "on3"));
  EXPECT_EQ(engines_with_backup_image(), (std::vector<int>{2}));

  // Four GPUs fit on lab2 alone: placement sends the restore (and its image) there.
  auto placed = restore(c, "on2", 4, "");
  ASSERT_TRUE(ok(placed)) << placed.body;
  EXPECT_EQ(placed.json()["data"]["host"], "lab2");
  EXPECT_TRUE(on_engine(1, "on2"));
  EXPECT_EQ(engines_with_backup_image(), (std::vector<int>{1, 2}));

  // No host has 3 free GPUs now (lab1 2, lab3 2, lab2 none): refused before any load.
  ASSERT_TRUE(ok(c.post_json(kApi + "/delete", {{"name", "on3"}})));
  EXPECT_EQ(engines_with_backup_image(), (std::vector<int>{1}));
  auto none = restore(c, "nowhere", 3, "");
  EXPECT_EQ(code(none), "GPU_ALLOCATION_FAILED") << none.body;
  EXPECT_EQ(engines_with_backup_image(), (std::vector<int>{1}));
  auto unknown = restore(c, "there", 0, "nope");
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_EQ(engines_with_backup_image(), (std::vector<int>{1}));
}

}  // namespace
}  // namespace gpulab::service::testing
