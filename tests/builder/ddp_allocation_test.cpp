// gpulab ddp's direct GPU and SSH-port choice on a real engine (--no-service): it skips what
// running containers hold (ddp's by index, the service's by UUID), says how many are free when
// too few are, and hands the container the shared attachment policy (docker/gpu_attachment.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "builder/ddp_allocation.h"
#include "support/docker_fixture.h"

namespace gpulab::builder {
namespace {

using testing::ContainerCleanup;

gpu::GpuInfo gpu_of(gpu::Vendor vendor, int index, const std::string& uuid) {
  gpu::GpuInfo g;
  g.vendor = vendor;
  g.index = index;
  g.uuid = uuid;
  return g;
}

// A running container that holds GPUs by a label, as ddp and the service mark theirs.
std::string holder(const docker::Client& client, const std::string& label, const std::string& value,
                   int host_port) {
  docker::CreateSpec s;
  s.name = testing::unique_name("ddp-holder");
  s.image = testing::kBusyboxImage;
  s.cmd = {"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"};
  s.labels = {{label, value}};
  if (host_port) s.ports.push_back({22, "tcp", host_port, "127.0.0.1"});
  auto id = client.create_container(s);
  if (!id.ok()) return {};
  // Only running containers hold GPUs: one that did not start is removed and counts as none.
  if (!client.start_container(*id).ok()) {
    (void)client.remove_container(*id, /*force=*/true);
    return {};
  }
  return *id;
}

TEST(DdpAllocation, DirectPathSkipsWhatContainersHoldAndSaysHowManyAreFree) {
  GPULAB_REQUIRE_DOCKER(client);
  // UUIDs, indices and ports of this test alone: other tests' containers on the engine (a lab
  // test's ddp run labels GPUs 0 and 1 by index) never match them.
  const std::string tag = std::to_string(::getpid());
  const int first = 100 + ::getpid() % 10000 * 3;
  gpu::Inventory inv;
  for (int i = 0; i < 3; ++i)
    inv.gpus.push_back(
        gpu_of(gpu::Vendor::kNvidia, first + i, "GPU-ddp-" + tag + "-" + std::to_string(i)));
  DdpOptions opts;
  opts.no_service = true;
  opts.ssh_port_base = testing::unique_port_base();
  // The service's container holds GPU 2 by UUID and the first SSH port.
  ContainerCleanup service_one{
      client, holder(client, "gpulab.gpus", *inv.gpus[2].uuid, opts.ssh_port_base + 11)};
  ASSERT_FALSE(service_one.id.empty());
  std::ostringstream said;
  const docker::LabEngine engine(client);  // the adapter ddp reaches the engine through
  DdpAllocator allocator(opts, engine, inv, said);
  EXPECT_FALSE(allocator.via_service());
  EXPECT_NE(said.str().find("directly on the engine (--no-service)"), std::string::npos);

  DdpGrant g = allocator.allocate(2, /*want_ssh=*/true);
  EXPECT_EQ(g.gpu_indices, (std::vector<int>{first, first + 1}));
  EXPECT_EQ(g.ssh_port, opts.ssh_port_base + 22);  // base+11 is held
  ASSERT_EQ(g.gpu_requests.size(), 1u);
  EXPECT_EQ(g.gpu_requests[0].device_ids,
            (std::vector<std::string>{*inv.gpus[0].uuid, *inv.gpus[1].uuid}));
  EXPECT_EQ(g.env[0], "NVIDIA_VISIBLE_DEVICES=" + *inv.gpus[0].uuid + "," + *inv.gpus[1].uuid);
  EXPECT_TRUE(g.devices.empty());

  // A ddp container holds GPU 0 by index: one GPU is free, two cannot be had.
  ContainerCleanup ddp_one{client, holder(client, "gpulab.gpu_indices", std::to_string(first), 0)};
  ASSERT_FALSE(ddp_one.id.empty());
  try {
    (void)allocator.allocate(2, false);
    FAIL() << "two GPUs granted with one free";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kResourceExhausted);
    EXPECT_NE(std::string(e.what()).find("GPU allocation failed: 2 requested, 1 free"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(allocator.allocate(1, false).gpu_indices, (std::vector<int>{first + 1}));
}

TEST(DdpAllocation, CpuRanksGetNoDevicesAndAmdWithoutRenderNodeIsAnError) {
  GPULAB_REQUIRE_DOCKER(client);
  DdpOptions opts;
  opts.no_service = true;
  std::ostringstream said;
  gpu::Inventory none;
  const docker::LabEngine engine(client);
  DdpAllocator cpu(opts, engine, none, said);
  DdpGrant g = cpu.allocate(2, false);
  EXPECT_TRUE(g.gpu_indices.empty());
  EXPECT_TRUE(g.gpu_requests.empty());
  EXPECT_TRUE(g.devices.empty());
  EXPECT_EQ(g.env[0], "NVIDIA_VISIBLE_DEVICES=void");

  // An AMD GPU whose render node cannot be found would get /dev/kfd and no GPU: refused.
  gpu::Inventory amd;
  amd.gpus = {gpu_of(gpu::Vendor::kAmd, 0, "GPU-amd-" + std::to_string(::getpid()))};
  amd.gpus[0].pci_bus_id = "0000:ff:1f.7";  // no such device
  DdpAllocator on_amd(opts, engine, amd, said);
  try {
    (void)on_amd.allocate(1, false);
    FAIL() << "an AMD GPU without a render node was granted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kUnavailable);
    EXPECT_NE(std::string(e.what()).find("has no render node (0000:ff:1f.7)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpulab::builder
