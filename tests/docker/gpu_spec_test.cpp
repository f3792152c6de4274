// How GPU requests reach a real engine without a GPU: NVIDIA device requests are stored as sent
// and, with no NVIDIA toolkit, starting fails with kUnavailable and the install hint; the AMD
// shape (device nodes + extra groups) is checked with a harmless device node in its place.
#include <gtest/gtest.h>

#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

using testing::kBusyboxImage;
using testing::unique_name;
using Cleanup = testing::ContainerCleanup;

TEST(GpuSpec, NvidiaDeviceRequestWithoutToolkitIsUnavailable) {
  GPULAB_REQUIRE_DOCKER(client);
  auto info = client.info();
  ASSERT_TRUE(info.ok());
  if (std::find(info->runtimes.begin(), info->runtimes.end(), "nvidia") != info->runtimes.end())
    GTEST_SKIP() << "this engine has the NVIDIA runtime: the no-toolkit error cannot be seen here";
  CreateSpec s;
  s.name = unique_name("nv");
  s.image = kBusyboxImage;
  s.cmd = {"true"};
  GpuRequest g;
  g.device_ids = {"GPU-00000000-1111-2222-3333-444444444444"};
  s.gpus = {g};
  auto id = client.create_container(s);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  Cleanup c{client, *id};
  auto ins = client.inspect_container(*id);
  ASSERT_TRUE(ins.ok());
  ASSERT_EQ(ins->gpus.size(), 1u);
  EXPECT_EQ(ins->gpus[0].driver, "nvidia");
  EXPECT_EQ(ins->gpus[0].device_ids, g.device_ids);
  EXPECT_EQ(ins->gpus[0].capabilities, (std::vector<std::vector<std::string>>{{"gpu"}}));
  auto st = client.start_container(*id);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Code::kUnavailable) << st.error().to_string();
  EXPECT_NE(st.error().hint.find("NVIDIA Container Toolkit"), std::string::npos) << st.error().hint;
}

TEST(GpuSpec, AmdShapeDevicesAndGroups) {
  GPULAB_REQUIRE_DOCKER(client);
  // /dev/kfd and /dev/dri/renderD128 in the real thing; /dev/null and /dev/zero stand in here.
  CreateSpec s;
  s.name = unique_name("amd");
  s.image = kBusyboxImage;
  s.cmd = {"/bin/sh", "-c", "while true; do sleep 0.2; done"};
  s.devices = {{"/dev/null", "/dev/kfd", "rw"}, {"/dev/zero", "/dev/dri/renderD128", "rwm"}};
  s.group_add = {"44", "109"};  // video, render on Debian
  auto id = client.create_container(s);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  Cleanup c{client, *id};
  ASSERT_TRUE(client.start_container(*id).ok());
  auto ls =
      client.exec(*id, {"/bin/sh", "-c", "stat -c '%t,%T' /dev/kfd /dev/dri/renderD128; id -G"});
  ASSERT_TRUE(ls.ok()) << ls.error().to_string();
  EXPECT_EQ(ls->exit_code, 0) << ls->err;
  EXPECT_EQ(ls->out, "1,3\n1,5\n0 44 109\n");  // null is 1:3, zero is 1:5
  auto ins = client.inspect_container(*id);
  ASSERT_EQ(ins->devices.size(), 2u);
  EXPECT_EQ(ins->devices[0].path_in_container, "/dev/kfd");
  EXPECT_EQ(ins->devices[0].cgroup_permissions, "rw");
}

}  // namespace
}  // namespace gpulab::docker
