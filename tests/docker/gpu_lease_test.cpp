// The lease wire format shared by gpulab serve and gpulab ddp: what one side writes, the other
// reads back whole; a broken answer is a data error, not a crash.
#include <gtest/gtest.h>

#include "docker/gpu_lease.h"

namespace gpulab::docker {
namespace {

GpuLease sample() {
  GpuLease l;
  l.name = "ddp-abcde";
  l.owner = "alice";
  l.gpu_indices = {0, 1};
  l.gpu_uuids = {"GPU-a", "GPU-b"};
  l.ssh_port = 2211;
  l.gpu_type = "nvidia";
  l.created_at = "2026-01-01T00:00:00Z";
  return l;
}

TEST(GpuLease, ListFormHasNoAttachment) {
  GpuLease l = sample();
  Json j = l.to_json();
  EXPECT_EQ(j["gpu_count"], 2);
  EXPECT_EQ(j["gpu_devices"], Json::array({0, 1}));
  EXPECT_EQ(j["label"], Json({{"gpulab.lease", "ddp-abcde"}}));
  EXPECT_TRUE(j["container"].is_null());
  EXPECT_FALSE(j.contains("attachment"));
  EXPECT_FALSE(j.contains("grace_seconds"));
  auto back = GpuLease::from_json(j);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->gpu_indices, l.gpu_indices);
  EXPECT_EQ(back->label, kLeaseLabel);
  EXPECT_FALSE(back->container.has_value());
  EXPECT_FALSE(back->attachment.has_value());
}

TEST(GpuLease, CreatedFormRoundTripsTheAttachment) {
  GpuLease l = sample();
  l.container = "ddp-abcde-2-0-1";
  GpuRequest r;
  r.device_ids = {"GPU-a", "GPU-b"};
  l.attachment =
      LeaseAttachment{{"NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b"},
                      {r},
                      {{"/dev/kfd", "", "rwm"}, {"/dev/dri/renderD128", "/dev/x", "rw"}}};
  l.grace_seconds = 120;
  l.engine_id = "ENGINE:ID";
  auto back = GpuLease::from_json(l.to_json());
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->container, "ddp-abcde-2-0-1");
  ASSERT_TRUE(back->attachment.has_value());
  EXPECT_EQ(back->attachment->env, l.attachment->env);
  ASSERT_EQ(back->attachment->device_requests.size(), 1u);
  EXPECT_EQ(back->attachment->device_requests[0].driver, "nvidia");
  EXPECT_EQ(back->attachment->device_requests[0].device_ids, r.device_ids);
  ASSERT_EQ(back->attachment->devices.size(), 2u);
  EXPECT_EQ(back->attachment->devices[1].path_in_container, "/dev/x");
  EXPECT_EQ(back->attachment->devices[1].cgroup_permissions, "rw");
  EXPECT_EQ(back->grace_seconds, 120);
  EXPECT_EQ(back->engine_id, "ENGINE:ID");
}

TEST(GpuLease, BrokenAnswerIsADataError) {
  Json j = sample().to_json();
  j.erase("gpu_uuids");
  auto a = GpuLease::from_json(j);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().code, Code::kDataError);
  Json k = sample().to_json();
  k["label"] = Json::object();
  EXPECT_FALSE(GpuLease::from_json(k).ok());
  Json m = sample().to_json();
  m["attachment"] = {{"env", Json::array()}};  // no device_requests
  EXPECT_FALSE(GpuLease::from_json(m).ok());
}

}  // namespace
}  // namespace gpulab::docker
