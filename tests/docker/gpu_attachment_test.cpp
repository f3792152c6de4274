// The one GPU attachment policy (service lab containers, leases, gpulab ddp's direct path): only
// the GPUs given reach the engine, NVIDIA by id, AMD by /dev/kfd and each GPU's own render node.
#include <gtest/gtest.h>

#include "docker/gpu_attachment.h"

namespace gpulab::docker {
namespace {

TEST(GpuAttachment, NvidiaByIdAndVoidWithoutGpus) {
  auto a = gpu_attachment({{"nvidia", "GPU-a", "", ""}, {"nvidia", "GPU-c", "", ""}}, {});
  ASSERT_EQ(a.requests.size(), 1u);
  EXPECT_EQ(a.requests[0].device_ids, (std::vector<std::string>{"GPU-a", "GPU-c"}));
  EXPECT_TRUE(a.devices.empty());
  EXPECT_EQ(a.env, (std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-c",
                                             "GPULAB_GPU_UUIDS=GPU-a,GPU-c"}));
  // None given: nothing asked, and an image's NVIDIA_VISIBLE_DEVICES=all is overridden.
  auto none = gpu_attachment({}, {});
  EXPECT_TRUE(none.requests.empty());
  EXPECT_TRUE(none.devices.empty());
  EXPECT_EQ(none.env[0], "NVIDIA_VISIBLE_DEVICES=void");
}

TEST(GpuAttachment, AmdGetsKfdAndOnlyItsOwnRenderNodes) {
  AttachmentOptions opts;
  opts.kfd_in_container = "/dev/kfd";
  opts.video_group = true;
  auto a = gpu_attachment({{"amd", "GPU-1", "/dev/dri/renderD129", ""},
                           {"amd", "GPU-3", "/dev/dri/renderD131", "/dev/dri/renderD128"}},
                          opts);
  EXPECT_TRUE(a.requests.empty());
  ASSERT_EQ(a.devices.size(), 3u);
  EXPECT_EQ(a.devices[0].path_on_host, "/dev/kfd");
  EXPECT_EQ(a.devices[1].path_on_host, "/dev/dri/renderD129");
  EXPECT_EQ(a.devices[1].path_in_container, "/dev/dri/renderD129");
  EXPECT_EQ(a.devices[2].path_on_host, "/dev/dri/renderD131");
  EXPECT_EQ(a.devices[2].path_in_container, "/dev/dri/renderD128");
  for (const auto& d : a.devices) EXPECT_NE(d.path_on_host, "/dev/dri");  // never the whole folder
  EXPECT_EQ(a.group_add, (std::vector<std::string>{"video"}));
  for (const auto& e : a.env) EXPECT_EQ(e.find("HIP_VISIBLE_DEVICES"), std::string::npos) << e;
  EXPECT_EQ(a.env[0], "NVIDIA_VISIBLE_DEVICES=void");
  EXPECT_EQ(a.env[1], "GPULAB_GPU_UUIDS=GPU-1,GPU-3");
}

TEST(GpuAttachment, WithoutDeviceMappingOnlyTheVisibilityVariables) {
  AttachmentOptions opts;
  opts.map_devices = false;
  auto a = gpu_attachment(
      {{"nvidia", "GPU-a", "", ""}, {"amd", "GPU-1", "/dev/dri/renderD129", ""}}, opts);
  EXPECT_TRUE(a.requests.empty());
  EXPECT_TRUE(a.devices.empty());
  EXPECT_TRUE(a.group_add.empty());
  EXPECT_EQ(a.env[1], "GPULAB_GPU_UUIDS=GPU-a,GPU-1");
}

}  // namespace
}  // namespace gpulab::docker
