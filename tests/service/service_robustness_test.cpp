// Concurrency, crashes and consistency against a real dockerd: 50 simultaneous creates for 4
// GPUs, SIGKILL in the middle of creates and backups, containers removed behind the service's
// back, AMD device mapping, and a move between two engines through download and upload.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/base/crypto.h"
#include "service/ops/containers/container_ops.h"
#include "service/store/book_id.h"
#include "service/store/store.h"
#include "service_env.h"

namespace gpulab::service::testing {
namespace {

class ServiceRobustness : public ServiceTest {
 protected:
  // A create the killed service had sent may finish on the engine after the restart's reconcile
  // rolled its row back; the reconciler's periodic pass (6 s here) removes that container. Waits
  // up to 15 s for it, so the checks below see the settled state, not the race.
  void wait_orphans_removed() {
    for (int i = 0; i < 150; ++i) {
      auto store = Store::open(svc_->db_path().string());
      ASSERT_TRUE(store.ok());
      std::set<std::string> booked;
      for (const auto& r : (*store)->containers()) booked.insert(r.name);
      docker::ListOptions lo;
      lo.all = true;
      lo.labels = {"gpulab.managed=true"};
      auto list = client_->list_containers(lo);
      ASSERT_TRUE(list.ok());
      bool orphan = false;
      for (const auto& c : *list)
        if (c.name.rfind(prefix_, 0) == 0 && !booked.count(c.name)) orphan = true;
      if (!orphan) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // The book and the engine agree: every row has its engine container and vice versa, no intent
  // is left, no GPU or port is held twice or by a missing container, no partial backup file.
  void expect_consistent() {
    auto store = Store::open(svc_->db_path().string());
    ASSERT_TRUE(store.ok());
    auto rows = (*store)->containers();
    std::set<std::string> booked;
    for (const auto& r : rows) {
      booked.insert(r.name);
      EXPECT_TRUE(r.state == state::kRunning || r.state == state::kExited ||
                  r.state == state::kCreated)
          << r.name << " left in state " << r.state;
      EXPECT_TRUE(client_->inspect_container(r.name).ok())
          << r.name << " booked but not on the engine";
    }
    docker::ListOptions lo;
    lo.labels = {"gpulab.managed=true"};
    auto list = client_->list_containers(lo);
    ASSERT_TRUE(list.ok());
    std::set<std::string> engine_gpus;
    for (const auto& c : *list) {
      if (c.name.rfind(prefix_, 0) != 0) continue;
      EXPECT_TRUE(booked.count(c.name)) << c.name << " on the engine but not in the book";
      for (const auto& g : split(c.labels.at("gpulab.gpus"), ','))
        EXPECT_TRUE(engine_gpus.insert(g).second) << g << " held by two engine containers";
    }
    auto holders = (*store)->gpu_holders();
    for (const auto& [uuid, name] : holders) EXPECT_TRUE(booked.count(name));
    auto rows_gpus = (*store)->db().query(
        "SELECT COUNT(*) FROM gpu_allocations WHERE container_id NOT IN (SELECT id FROM "
        "containers)");
    EXPECT_EQ(rows_gpus[0].i64(0), 0);
    auto ports = (*store)->db().query(
        "SELECT COUNT(*) FROM port_allocations WHERE container_id NOT IN (SELECT id FROM "
        "containers)");
    EXPECT_EQ(ports[0].i64(0), 0);
    for (const auto& b : (*store)->backups()) EXPECT_NE(b.state, "running") << b.name;
    for (const auto& e : std::filesystem::directory_iterator(svc_->backup_dir()))
      EXPECT_EQ(e.path().string().find(".partial"), std::string::npos) << e.path();
    // Nothing of a killed request stays in the service's temporary folder (gpulab-put-*).
    for (const auto& e : std::filesystem::directory_iterator(svc_->tmp_dir()))
      ADD_FAILURE() << "left behind: " << e.path();
  }
};

TEST_F(ServiceRobustness, FiftyConcurrentCreatesForFourGpus) {
  start_service(four_gpu_config(engine_->host, unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  const int n = 50;
  std::vector<HttpResult> results(n);
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      HttpClient c(svc_->url());
      while (!go) std::this_thread::yield();
      results[i] = c.post_json(
          "/api/v1/gpu-docker/create",
          {{"name", prefix_ + "-c" + std::to_string(i)}, {"image", kBoxImage}, {"gpu_count", 1}});
    });
  }
  go = true;
  for (auto& t : threads) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int created = 0, refused = 0, other = 0;
  std::set<int> gpus, ports;
  for (const auto& r : results) {
    if (ok(r)) {
      ++created;
      Json answer = r.json();  // keep the document alive while iterating it
      for (int g : answer["data"]["gpu_devices"])
        EXPECT_TRUE(gpus.insert(g).second) << "GPU " << g << " twice";
      EXPECT_TRUE(ports.insert(r.json()["data"]["ssh_port"].get<int>()).second);
    } else if (code(r) == "GPU_ALLOCATION_FAILED") {
      ++refused;
    } else {
      ++other;
      ADD_FAILURE() << r.status << " " << r.body << r.error;
    }
  }
  std::printf(
      "[ figures  ] 50 concurrent creates: %d created, %d GPU_ALLOCATION_FAILED, %d other, %.2f "
      "s\n",
      created, refused, other, secs);
  EXPECT_EQ(created, 4);
  EXPECT_EQ(refused, 46);
  EXPECT_EQ(engine_managed_count(prefix_), 4);
  expect_consistent();
}

TEST_F(ServiceRobustness, SigkillDuringCreatesAndBackupsLeaksNothing) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  {
    HttpClient c(svc_->url());
    ASSERT_TRUE(
        ok(c.post_json("/api/v1/gpu-docker/create",
                       {{"name", prefix_ + "-base"}, {"image", kBoxImage}, {"gpu_count", 1}})));
  }
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> stop{false};
    std::vector<std::thread> load;
    for (int t = 0; t < 4; ++t) {
      load.emplace_back([&, t] {
        HttpClient c(svc_->url());
        for (int i = 0; !stop; ++i) {
          std::string n = prefix_ + "-r" + std::to_string(round) + "-" + std::to_string(t) + "-" +
                          std::to_string(i);
          if (t == 0) {
            c.post_json("/api/v1/gpu-docker/backup",
                        {{"name", prefix_ + "-base"}, {"backup_name", n}});
          } else {
            c.post_json("/api/v1/gpu-docker/create",
                        {{"name", n}, {"image", kBoxImage}, {"gpu_count", 1}});
            c.post_json("/api/v1/gpu-docker/delete", {{"name", n}});
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(700 + 400 * round));
    svc_->kill_hard();
    stop = true;
    for (auto& t : load) t.join();
    ASSERT_TRUE(svc_->start()) << svc_->log_tail();  // start-up reconciles
    wait_orphans_removed();
    expect_consistent();
    HttpClient c(svc_->url());
    auto status = c.get("/api/v1/gpu-docker/status");
    auto used = status.json()["data"]["used_gpu_indices"].size();
    EXPECT_EQ(used, static_cast<size_t>(engine_managed_count(prefix_))) << status.body;
  }
}

TEST_F(ServiceRobustness, ContainerRemovedOutsideReleasesItsGpu) {
  start_service(four_gpu_config(engine_->host, unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  std::string name = prefix_ + "-gone";
  ASSERT_TRUE(ok(c.post_json("/api/v1/gpu-docker/create",
                             {{"name", name}, {"image", kBoxImage}, {"gpu_count", 2}})));
  EXPECT_EQ(c.get("/api/v1/gpu-docker/status").json()["data"]["used_gpu_indices"].size(), 2u);
  ASSERT_TRUE(client_->remove_container(name, true).ok());
  bool released = false;
  for (int i = 0; i < 100 && !released; ++i) {
    released = c.get("/api/v1/gpu-docker/status").json()["data"]["used_gpu_indices"].empty();
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(released);
  EXPECT_EQ(code(c.post_json("/api/v1/gpu-docker/stop", {{"name", name}})), "CONTAINER_NOT_FOUND");
}

// A container this book made but has no row for (a create whose clean-up did not finish) gives
// its name back at the next create of that name; another service's container keeps it.
TEST_F(ServiceRobustness, CreateTakesBackItsOwnLeftoverNameButNotAnotherServices) {
  ASSERT_TRUE(ensure_service_images(*client_, false).ok());
  ServiceConfig cfg = in_process_config();
  auto s = open_service(cfg);  // no reconciler thread: only the create can remove the leftover
  auto engine_only = [&](const std::string& name, const std::string& book) {
    docker::CreateSpec spec;
    spec.name = name;
    spec.image = kBoxImage;
    spec.labels = {{"gpulab.managed", "true"}, {kBookLabel, book}};
    auto id = client_->create_container(spec);
    EXPECT_TRUE(id.ok()) << id.error().to_string();
    return id.ok() ? *id : std::string();
  };
  CreateOptions o;
  o.owner = "alice";
  o.spec.image = kBoxImage;

  o.name = prefix_ + "-left";
  std::string left = engine_only(o.name, book_id(*s->store));
  auto made = create_container(*s, o).record;
  EXPECT_EQ(made.state, state::kRunning);
  EXPECT_NE(made.docker_id, left);
  EXPECT_FALSE(client_->inspect_container(left).ok()) << "the leftover is still there";
  EXPECT_NE(s->store->audit_tail(5).dump().find("container without a row in the book"),
            std::string::npos);

  o.name = prefix_ + "-other";
  std::string other = engine_only(o.name, "another-service");
  try {
    create_container(*s, o);
    ADD_FAILURE() << "created over another service's container";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.api_code(), ApiCode::kNameConflict);
    EXPECT_NE(std::string(e.what()).find("outside this service"), std::string::npos) << e.what();
  }
  auto still = client_->inspect_container(o.name);
  ASSERT_TRUE(still.ok());
  EXPECT_EQ(still->id, other);
  EXPECT_FALSE(s->store->find_container(o.name));
}

TEST_F(ServiceRobustness, AmdContainerSeesOnlyItsDevices) {
  Json cfg = {{"docker_host", engine_->host},
              {"ssh_port_base", unique_port_base()},
              {"device_mode", "map"},
              {"amd_kfd_path", "/dev/zero"},
              {"amd_kfd_in_container", "/dev/kfd"},
              {"gpus", Json::array({{{"uuid", "GPU-amd-0"},
                                     {"index", 0},
                                     {"vendor", "amd"},
                                     {"render_node", "/dev/null"},
                                     {"render_node_in_container", "/dev/dri/renderD128"}},
                                    {{"uuid", "GPU-amd-1"},
                                     {"index", 1},
                                     {"vendor", "amd"},
                                     {"render_node", "/dev/full"},
                                     {"render_node_in_container", "/dev/dri/renderD129"}}})}};
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  std::string with = prefix_ + "-amd", without = prefix_ + "-nogpu";
  auto r = c.post_json("/api/v1/gpu-docker/create",
                       {{"name", with}, {"image", kBoxImage}, {"gpu_count", 1}});
  ASSERT_TRUE(ok(r)) << r.body;
  EXPECT_EQ(c.get("/api/v1/gpu-docker/status").json()["data"]["gpu_type"], "rocm");
  ASSERT_TRUE(ok(c.post_json("/api/v1/gpu-docker/create",
                             {{"name", without}, {"image", kBoxImage}, {"gpu_count", 0}})));
  auto ls1 = client_->exec(with, {"sh", "-c", "ls /dev/kfd /dev/dri/ 2>&1"});
  ASSERT_TRUE(ls1.ok());
  EXPECT_NE(ls1->out.find("/dev/kfd"), std::string::npos) << ls1->out;
  EXPECT_NE(ls1->out.find("renderD128"), std::string::npos) << ls1->out;
  EXPECT_EQ(ls1->out.find("renderD129"), std::string::npos) << ls1->out;  // the other GPU
  auto ls2 = client_->exec(without, {"sh", "-c", "ls /dev/kfd /dev/dri 2>&1; true"});
  ASSERT_TRUE(ls2.ok());
  EXPECT_EQ(ls2->out.find("renderD"), std::string::npos) << ls2->out;
  EXPECT_NE(ls2->out.find("No such file"), std::string::npos) << ls2->out;
  auto info = client_->inspect_container(with);
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE(info->raw["HostConfig"].value("Privileged", true));
  EXPECT_EQ(info->devices.size(), 2u);
}

TEST_F(ServiceRobustness, MoveBetweenEnginesByDownloadAndUpload) {
  auto peer = gpulab::testing::peer_engine();
  if (!peer && peer.error().code == Code::kUnsupported) GTEST_SKIP() << peer.error().to_string();
  ASSERT_TRUE(peer.ok()) << peer.error().to_string();  // a peer that should start and does not
  auto peer_client = gpulab::testing::client_for(*peer);
  ASSERT_TRUE(peer_client.ok());
  auto images = ensure_service_images(*peer_client, false);
  ASSERT_TRUE(images.ok()) << images.error().to_string();
  start_service(four_gpu_config(engine_->host, unique_port_base()));
  if (HasFatalFailure() || IsSkipped()) return;
  ServiceProcess other(dir_ / "peer", four_gpu_config(peer->host, unique_port_base()));
  ASSERT_TRUE(other.start()) << other.log_tail();
  HttpClient a(svc_->url()), b(other.url());
  std::string name = prefix_ + "-mover";
  ASSERT_TRUE(ok(a.post_json("/api/v1/gpu-docker/create",
                             {{"name", name}, {"image", kBoxImage}, {"gpu_count", 1}})));
  std::string payload = random_secret(4096);
  ASSERT_TRUE(
      client_->exec(name, {"sh", "-c", "mkdir -p /work && echo " + payload + " > /work/data.txt"})
          .ok());
  auto t0 = std::chrono::steady_clock::now();
  auto bk = a.post_json("/api/v1/gpu-docker/backup",
                        {{"name", name}, {"backup_name", prefix_ + "-move"}});
  ASSERT_TRUE(ok(bk)) << bk.body;
  auto file = dir_ / "download.tar";
  auto dl = a.download("/api/v1/gpu-docker/backups/download?backup_name=" + prefix_ + "-move",
                       file.string());
  ASSERT_EQ(dl.status, 200) << dl.error;
  EXPECT_EQ(std::filesystem::file_size(file),
            std::filesystem::file_size(svc_->backup_dir() / ("backup_" + prefix_ + "-move.tar")));
  auto up = b.put_file("/api/v1/gpu-docker/backups/upload?backup_name=" + prefix_ + "-move",
                       file.string());
  ASSERT_TRUE(ok(up)) << up.body;
  std::string moved = prefix_ + "-moved";
  auto rr =
      b.post_json("/api/v1/gpu-docker/restore",
                  {{"backup_path", prefix_ + "-move.tar"}, {"name", moved}, {"gpu_count", 2}});
  ASSERT_TRUE(ok(rr)) << rr.body;
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto cat = peer_client->exec(moved, {"cat", "/work/data.txt"});
  ASSERT_TRUE(cat.ok());
  EXPECT_EQ(cat->out, payload + "\n");
  std::printf("[ figures  ] move: backup %lld bytes, backup+download+upload+restore %.2f s\n",
              static_cast<long long>(std::filesystem::file_size(file)), secs);
  (void)peer_client->remove_container(moved, true);
  (void)peer_client->remove_image("gpulab-backup:" + prefix_ + "-move", true);
  other.stop();
}

}  // namespace
}  // namespace gpulab::service::testing
