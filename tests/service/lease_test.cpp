// GPU leases (for gpulab ddp) against a real dockerd: a lease holds its GPUs and SSH port in the
// service's books, creates through the API never get them, and the lease ends with its container.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "service_env.h"

namespace gpulab::service::testing {
namespace {

class ServiceLeases : public ServiceTest {
 protected:
  // Polls status until `pred` holds (or ~timeout_s passes).
  template <typename Pred>
  bool eventually(HttpClient& c, Pred pred, int timeout_s = 20) {
    for (int i = 0; i < timeout_s * 10; ++i) {
      if (pred(c.get("/api/v1/gpu-docker/status").json()["data"])) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
};

std::set<int> as_set(const Json& a) {
  std::set<int> s;
  for (const auto& v : a) s.insert(v.get<int>());
  return s;
}

TEST_F(ServiceLeases, LeaseHoldsGpusAndPortUntilItsContainerIsGone) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["reconcile_interval_seconds"] = 1;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  const std::string& api = kApi;
  std::string lease = prefix_ + "-ddp";
  auto l = c.post_json(api + "/leases", {{"name", lease}, {"gpu_count", 2}});
  ASSERT_TRUE(ok(l)) << l.body;
  Json ld = l.json()["data"];
  std::set<int> leased = as_set(ld["gpu_devices"]);
  int lease_port = ld["ssh_port"];
  ASSERT_EQ(leased.size(), 2u);
  EXPECT_GT(lease_port, 0);
  EXPECT_EQ(ld["label"]["gpulab.lease"], lease);
  // The test config declares its GPUs without devices (device_mode none): visibility env only.
  const Json& env = ld["attachment"]["env"];
  std::string uuids =
      ld["gpu_uuids"][0].get<std::string>() + "," + ld["gpu_uuids"][1].get<std::string>();
  EXPECT_NE(std::find(env.begin(), env.end(), "NVIDIA_VISIBLE_DEVICES=" + uuids), env.end())
      << ld.dump();
  Json st = c.get(api + "/status").json()["data"];
  EXPECT_EQ(as_set(st["used_gpu_indices"]), leased);
  EXPECT_EQ(as_set(st["container_gpu_mapping"][lease]), leased);

  // The API hands out only the other two GPUs and never the lease's port.
  auto a =
      c.post_json(api + "/create", {{"name", prefix_ + "-a"},
                                    {"image", kBoxImage},
                                    {"gpu_count", 2},
                                    {"port", Json::array({std::to_string(lease_port) + ":80"})}});
  EXPECT_EQ(code(a), "PORT_CONFLICT") << a.body;
  a = c.post_json(api + "/create",
                  {{"name", prefix_ + "-a"}, {"image", kBoxImage}, {"gpu_count", 2}});
  ASSERT_TRUE(ok(a)) << a.body;
  Json created = a.json();  // a named document: ranging over a temporary's member dangles
  for (int g : created["data"]["gpu_devices"]) EXPECT_FALSE(leased.count(g)) << g;
  EXPECT_NE(a.json()["data"]["ssh_port"].get<int>(), lease_port);
  auto b = c.post_json(api + "/create",
                       {{"name", prefix_ + "-b"}, {"image", kBoxImage}, {"gpu_count", 1}});
  EXPECT_EQ(code(b), "GPU_ALLOCATION_FAILED") << b.body;
  // A lease is not a container: the container endpoints refuse it, list does not show it.
  EXPECT_EQ(code(c.post_json(api + "/delete", {{"name", lease}})), "STATE_CONFLICT");
  Json listed = c.get(api + "/list").json();
  for (const auto& row : listed["data"]["containers"]) EXPECT_NE(row["name"], lease);

  // ddp's container, made on the engine with the lease's label (and a host port the service
  // booked for it), keeps the lease; releasing is refused while it exists.
  docker::CreateSpec spec;
  spec.name = lease + "-2-x";
  spec.image = kBoxImage;
  spec.labels = {{"gpulab.managed", "true"}, {"gpulab.lease", lease}};
  spec.ports.push_back({22, "tcp", lease_port, "0.0.0.0"});
  auto id = client_->create_container(spec);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  ASSERT_TRUE(client_->start_container(*id).ok());
  auto ls = c.get(api + "/leases").json()["data"]["leases"];
  ASSERT_EQ(ls.size(), 1u) << ls.dump();
  EXPECT_TRUE(eventually(c, [&](const Json&) {
    return c.get(api + "/leases").json()["data"]["leases"][0]["container"] == spec.name;
  }));
  EXPECT_EQ(code(c.post_json(api + "/leases/release", {{"name", lease}})), "STATE_CONFLICT");
  // Still held after a whole reconcile pass that began after the container was there (passes
  // come every second here; 20 s is far past one).
  const long passes = reconcile_passes(c);
  ASSERT_GE(passes, 0) << "no gpulab_reconcile_passes_total in /metrics";
  ASSERT_TRUE(eventually(c, [&](const Json&) { return reconcile_passes(c) >= passes + 2; }))
      << "no reconcile pass in 20 s";
  EXPECT_EQ(c.get(api + "/status").json()["data"]["used_gpu_indices"].size(), 4u);

  // The container goes: reconcile releases the lease (its port rests, its GPUs are free).
  ASSERT_TRUE(client_->remove_container(*id, true).ok());
  EXPECT_TRUE(eventually(c, [](const Json& d) { return d["used_gpu_indices"].size() == 2u; }));
  EXPECT_TRUE(c.get(api + "/leases").json()["data"]["leases"].empty());
  b = c.post_json(api + "/create",
                  {{"name", prefix_ + "-b"}, {"image", kBoxImage}, {"gpu_count", 2}});
  ASSERT_TRUE(ok(b)) << b.body;
  EXPECT_EQ(as_set(b.json()["data"]["gpu_devices"]), leased);
  EXPECT_NE(b.json()["data"]["ssh_port"].get<int>(), lease_port);  // resting after release
}

TEST_F(ServiceLeases, ExplicitReleaseAndUnusedLeaseExpiry) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["reconcile_interval_seconds"] = 1;
  cfg["lease_grace_seconds"] = 2;
  cfg["auth_required"] = true;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  HttpClient alice(svc_->url(), svc_->add_user("alice", false));
  HttpClient bob(svc_->url(), svc_->add_user("bob", false));
  auto l = alice.post_json(api + "/leases",
                           {{"name", prefix_ + "-l1"}, {"gpu_count", 1}, {"ssh_port", false}});
  ASSERT_TRUE(ok(l)) << l.body;
  EXPECT_EQ(l.json()["data"]["ssh_port"], 0);
  // Another user neither sees nor releases it; the owner does.
  EXPECT_TRUE(bob.get(api + "/leases").json()["data"]["leases"].empty());
  EXPECT_EQ(code(bob.post_json(api + "/leases/release", {{"name", prefix_ + "-l1"}})), "FORBIDDEN");
  EXPECT_EQ(code(alice.post_json(api + "/leases", {{"name", prefix_ + "-l1"}})), "NAME_CONFLICT");
  EXPECT_EQ(code(alice.post_json(api + "/leases", {{"name", "a/b"}})), "INVALID_REQUEST");
  EXPECT_EQ(code(alice.post_json(api + "/leases", {{"name", prefix_ + "-x"}, {"gpu_count", 5}})),
            "GPU_ALLOCATION_FAILED");
  EXPECT_EQ(code(alice.post_json(api + "/leases", {{"name", prefix_ + "-y"}, {"binds", "/"}})),
            "INVALID_REQUEST");
  ASSERT_TRUE(ok(alice.post_json(api + "/leases/release", {{"name", prefix_ + "-l1"}})));
  EXPECT_TRUE(alice.get(api + "/status").json()["data"]["used_gpu_indices"].empty());
  // A lease whose container never comes is released after the grace time.
  ASSERT_TRUE(ok(alice.post_json(api + "/leases", {{"name", prefix_ + "-l2"}, {"gpu_count", 3}})));
  EXPECT_EQ(alice.get(api + "/status").json()["data"]["used_gpu_indices"].size(), 3u);
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    released = alice.get(api + "/status").json()["data"]["used_gpu_indices"].empty();
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(released);
}

TEST_F(ServiceLeases, GpusOfADdpRunWithoutLeaseAreNotHandedOut) {
  // GPU indices 10-13: no other test's service declares them, so the fake ddp run below cannot
  // take GPUs from tests running beside this one on the same engine.
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  for (int i = 0; i < 4; ++i) {
    cfg["gpus"][i]["index"] = 10 + i;
    cfg["gpus"][i]["links"] = Json::array({10 + (i ^ 1)});
  }
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  const std::string& api = kApi;
  // What `gpulab ddp --no-service` leaves on the engine: labels only, no lease.
  docker::CreateSpec spec;
  spec.name = prefix_ + "-direct-2-11-12";
  spec.image = kBoxImage;
  spec.labels = {
      {"gpulab.managed", "true"}, {"gpulab.kind", "ddp"}, {"gpulab.gpu_indices", "11,12"}};
  auto id = client_->create_container(spec);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  ASSERT_TRUE(client_->start_container(*id).ok());
  EXPECT_EQ(code(c.post_json(api + "/create",
                             {{"name", prefix_ + "-a"}, {"image", kBoxImage}, {"gpu_count", 3}})),
            "GPU_ALLOCATION_FAILED");
  auto a = c.post_json(api + "/create",
                       {{"name", prefix_ + "-a"}, {"image", kBoxImage}, {"gpu_count", 2}});
  ASSERT_TRUE(ok(a)) << a.body;
  EXPECT_EQ(as_set(a.json()["data"]["gpu_devices"]), (std::set<int>{10, 13}));
  // Once that run is gone its GPUs are free again.
  ASSERT_TRUE(client_->remove_container(*id, true).ok());
  auto b = c.post_json(api + "/create",
                       {{"name", prefix_ + "-b"}, {"image", kBoxImage}, {"gpu_count", 2}});
  ASSERT_TRUE(ok(b)) << b.body;
  EXPECT_EQ(as_set(b.json()["data"]["gpu_devices"]), (std::set<int>{11, 12}));
}

}  // namespace
}  // namespace gpulab::service::testing
