// GPU leases in a lab service (gpulab ddp through gpulab serve): ddp finds the host whose engine it
// runs on by the engine ids /healthz gives and books its GPUs there; the lease lives while its
// container runs on that host and is released once the container is gone.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "lab_hosts.h"
#include "service/store/store.h"

#ifdef GPULAB_TEST_WITH_BUILDER
#include "builder/ddp_allocation.h"
#endif

namespace gpulab::service::testing {
namespace {

using Clock = std::chrono::steady_clock;

class ServiceHostsLease : public LabHostsTest {
 protected:
  // GPUs of `host` booked in the service (a lease's or a container's).
  int allocated_on(HttpClient& c, const std::string& host) {
    int n = 0;
    const Json gpus = c.get(kApi + "/gpus").json();  // held: the loop reads inside it
    for (const auto& g : gpus["data"]["gpus"])
      if (g["host"] == host && g["allocated"].get<bool>()) ++n;
    return n;
  }
};

TEST_F(ServiceHostsLease, HealthzNamesEachHostsEngineAndALeaseNamesItsHost) {
  start(lab_config());
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  std::map<std::string, std::string> ids;
  const Json health = c.get("/healthz").json();  // held: the loop reads inside it
  for (const auto& h : health["data"]["hosts"])
    ids[h["name"].get<std::string>()] = h.value("engine_id", std::string());
  ASSERT_EQ(ids.size(), 3u);
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    auto info = engines_[i].client->info();
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(ids[engines_[i].name], info->id) << engines_[i].name;
    distinct.insert(ids[engines_[i].name]);
  }
  EXPECT_EQ(distinct.size(), 3u);

  auto lease = c.post_json(kApi + "/leases", {{"name", "ls3"}, {"gpu_count", 2}, {"host", "lab3"}});
  ASSERT_TRUE(ok(lease)) << lease.body;
  EXPECT_EQ(lease.json()["data"]["engine_id"], ids["lab3"]);
  EXPECT_EQ(allocated_on(c, "lab3"), 2);
  EXPECT_EQ(allocated_on(c, "lab1"), 0);
  auto nowhere =
      c.post_json(kApi + "/leases", {{"name", "ls4"}, {"gpu_count", 1}, {"host", "nope"}});
  EXPECT_EQ(nowhere.status, 400) << nowhere.body;
  EXPECT_NE(nowhere.body.find("'nope'"), std::string::npos) << nowhere.body;
  auto too_many =
      c.post_json(kApi + "/leases", {{"name", "ls5"}, {"gpu_count", 1}, {"host", "lab3"}});
  EXPECT_EQ(code(too_many), "GPU_ALLOCATION_FAILED") << too_many.body;  // lab3 has 2, both leased
}

#ifdef GPULAB_TEST_WITH_BUILDER
TEST_F(ServiceHostsLease, DdpOnASecondHostsEngineLeasesThatHostsGpus) {
  start(lab_config());
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  builder::DdpOptions opts;
  opts.service_url = svc_->url();
  std::ostringstream said;
  gpu::Inventory none;  // ddp's own view of GPUs is not asked on the service path
  // ddp on lab2's engine (its unix socket: the engine the service reaches over TLS).
  const docker::LabEngine lab2(*engines_[1].client);  // the adapter ddp reaches its engine by
  builder::DdpAllocator allocator(opts, lab2, none, said);
  ASSERT_TRUE(allocator.via_service()) << said.str();
  EXPECT_NE(said.str().find("(host lab2)"), std::string::npos) << said.str();
  builder::DdpGrant g = allocator.allocate(3, /*want_ssh=*/true);
  EXPECT_EQ(g.gpu_indices.size(), 3u);
  EXPECT_GT(g.ssh_port, 0);
  EXPECT_EQ(allocated_on(c, "lab2"), 3);
  EXPECT_EQ(allocated_on(c, "lab1"), 0);

  // The run's container on lab2, labeled with the lease: the lease stays while it runs.
  docker::CreateSpec spec;
  spec.name = "ddp-run-lab2";
  spec.image = kBoxImage;
  spec.labels = g.labels;
  auto id = engines_[1].client->create_container(spec);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  ASSERT_TRUE(engines_[1].client->start_container(*id).ok());
  bool listed = false;
  const Json leases = c.get(kApi + "/leases").json();
  for (const auto& l : leases["data"]["leases"])
    if (l["name"] == g.lease && l.value("container", std::string()) == "ddp-run-lab2")
      listed = true;
  EXPECT_TRUE(listed) << c.get(kApi + "/leases").body;
  // The reconciler (on lab2's start event) binds the lease to the container's id; a lease whose
  // container was never seen is kept for the grace time instead.
  bool bound = false;
  for (int i = 0; i < 100 && !bound; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto store = Store::open(svc_->db_path().string());
    ASSERT_TRUE(store.ok());
    auto row = (*store)->find_container(g.lease);
    bound = row && row->docker_id == *id;
  }
  EXPECT_TRUE(bound);
  // Gone from lab2: the lease is released and lab2's GPUs are free again.
  ASSERT_TRUE(engines_[1].client->remove_container(*id, true).ok());
  auto t0 = Clock::now();
  while (allocated_on(c, "lab2") > 0 && Clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::printf("the lease on lab2 was released %.1f s after its container went\n",
              std::chrono::duration<double>(Clock::now() - t0).count());
  EXPECT_EQ(allocated_on(c, "lab2"), 0) << c.get(kApi + "/leases").body << log_lines();
}
#endif

}  // namespace
}  // namespace gpulab::service::testing
