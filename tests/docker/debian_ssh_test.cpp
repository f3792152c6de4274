// The Debian + sshd test image (debootstrap, cached rootfs, imported): a container from it
// accepts `ssh root@host -p <published port>` with password "root", as the seed's containers do.
#include <gtest/gtest.h>

#include <thread>

#include "core/files.h"
#include "core/subprocess.h"
#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

using testing::unique_name;

TEST(DebianSshImage, SshLoginWithPassword) {
  GPULAB_REQUIRE_DOCKER(client);
  if (!which("sshpass") || !which("ssh"))
    GTEST_SKIP() << "needs ssh and sshpass (apt-get install sshpass openssh-client)";
  auto st = testing::ensure_debian_ssh_image(client);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  auto image = client.inspect_image(testing::kDebianSshImage);
  ASSERT_TRUE(image.ok());
  EXPECT_EQ(image->exposed_ports, std::vector<std::string>{"22/tcp"});

  CreateSpec s;
  s.name = unique_name("ssh");
  s.image = testing::kDebianSshImage;
  s.ports = {{22, "tcp", 0, "127.0.0.1"}};
  auto id = client.create_container(s);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  testing::ContainerCleanup guard{client, *id};
  ASSERT_TRUE(client.start_container(*id).ok());
  auto info = client.inspect_container(*id);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->ports.size(), 1u);
  int port = info->ports[0].host_port;

  ProcessResult last;
  for (int i = 0; i < 40; ++i) {  // sshd makes its host keys first
    auto r =
        run_process({"sshpass", "-p", "root", "ssh", "-o", "StrictHostKeyChecking=no", "-o",
                     "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-p",
                     std::to_string(port), "root@127.0.0.1", "cat /etc/debian_version; id -un"});
    ASSERT_TRUE(r.ok());
    last = *r;
    if (last.success()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_TRUE(last.success()) << last.err << "\ncontainer log:\n" << client.logs(*id)->err;
  EXPECT_EQ(last.out.substr(0, 3), "12.") << last.out;
  EXPECT_NE(last.out.find("root"), std::string::npos);
}

}  // namespace
}  // namespace gpulab::docker
