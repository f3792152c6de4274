// The seed's walkthrough against a real dockerd, SSH login into a created container, and every
// refusal the service must make without creating anything.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <set>
#include <thread>

#include "core/files.h"
#include "core/subprocess.h"
#include "service/base/crypto.h"
#include "service_env.h"

namespace gpulab::service::testing {
namespace {

class ServiceApi : public ServiceTest {};

TEST_F(ServiceApi, SeedWalkthrough) {
  int base = unique_port_base();
  start_service(four_gpu_config(engine_->host, base));
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  const std::string& api = kApi;
  auto status = c.get(api + "/status");
  ASSERT_TRUE(ok(status)) << status.body;
  EXPECT_EQ(status.json()["message"], "GPU status retrieved successfully");
  EXPECT_EQ(status.json()["data"]["gpu_type"], "nvidia");
  EXPECT_EQ(status.json()["data"]["available_gpu_indices"], Json::array({0, 1, 2, 3}));
  EXPECT_EQ(status.json()["data"]["used_gpu_indices"], Json::array());

  std::string a = prefix_ + "-exp01", b = prefix_ + "-exp02";
  int p1 = base + 902, p2 = base + 903;  // user ports beside this test's SSH range
  auto r1 = c.post_json(api + "/create", {{"name", a},
                                          {"image", kBoxImage},
                                          {"port", {std::to_string(p1) + ":3002"}},
                                          {"gpu_count", 1},
                                          {"cpus", "2"},
                                          {"memory", "256m"}});
  ASSERT_TRUE(ok(r1)) << r1.body;
  EXPECT_EQ(r1.json()["message"], "Container created successfully");
  EXPECT_EQ(r1.json()["data"]["ssh_port"], base + 11);
  EXPECT_EQ(r1.json()["data"]["gpu_devices"], Json::array({0}));
  EXPECT_EQ(r1.json()["data"]["port_mappings"], Json::array({std::to_string(p1) + ":3002"}));
  EXPECT_EQ(r1.json()["data"]["ssh_password"].get<std::string>().size(), 20u);
  auto r2 = c.post_json(api + "/create", {{"name", b},
                                          {"image", kBoxImage},
                                          {"port", {std::to_string(p2) + ":3002"}},
                                          {"gpu_count", 1},
                                          {"cpus", "1"},
                                          {"memory", "256m"}});
  ASSERT_TRUE(ok(r2)) << r2.body;
  EXPECT_EQ(r2.json()["data"]["ssh_port"], base + 22);
  EXPECT_EQ(r2.json()["data"]["gpu_devices"], Json::array({1}));
  // The same host port again: the seed's PORT_CONFLICT message.
  auto clash = c.post_json(api + "/create", {{"name", prefix_ + "-x"},
                                             {"image", kBoxImage},
                                             {"port", {std::to_string(p1) + ":3002"}},
                                             {"gpu_count", 1}});
  EXPECT_EQ(code(clash), "PORT_CONFLICT");
  EXPECT_EQ(clash.json()["message"], "Port(s) already in use: [" + std::to_string(p1) + "]");

  auto list = c.get(api + "/list");
  ASSERT_TRUE(ok(list)) << list.body;
  EXPECT_EQ(list.json()["data"]["total"], 2);
  EXPECT_EQ(list.json()["data"]["containers"][0]["status"], "running");
  auto info = client_->inspect_container(a);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->nano_cpus, 2'000'000'000);
  EXPECT_EQ(info->labels.at("gpulab.gpus"), "GPU-fake-0");

  auto upd = c.post_json(api + "/update-resources", {{"name", a}, {"cpus", "1"}});
  EXPECT_TRUE(ok(upd)) << upd.body;
  EXPECT_EQ(upd.json()["data"]["status"], "running") << upd.body;  // issue 13: was "missing"
  EXPECT_EQ(client_->inspect_container(a)->nano_cpus, 1'000'000'000);
  EXPECT_TRUE(ok(c.post_json(api + "/stop", {{"name", b}})));
  EXPECT_FALSE(client_->inspect_container(b)->running);
  EXPECT_TRUE(ok(c.post_json(api + "/start", {{"name", b}})));
  EXPECT_TRUE(ok(c.post_json(api + "/restart", {{"name", b}})));
  EXPECT_TRUE(client_->inspect_container(b)->running);
  auto stats = c.get(api + "/stats?name=" + a);
  ASSERT_TRUE(ok(stats)) << stats.body;
  EXPECT_GT(stats.json()["data"]["memory_limit_bytes"].get<std::int64_t>(), 0);
  EXPECT_TRUE(ok(c.get(api + "/logs?name=" + a)));

  // Snapshot, delete, restore from the snapshot (the file written before survives).
  ASSERT_TRUE(client_->exec(a, {"sh", "-c", "echo kept > /root/marker"}).ok());
  std::string snap = prefix_ + "-checkpoint";
  auto s1 = c.post_json(api + "/snapshot", {{"name", a}, {"snapshot_name", snap}});
  ASSERT_TRUE(ok(s1)) << s1.body;
  auto snaps = c.get(api + "/snapshots");
  EXPECT_EQ(snaps.json()["data"]["total"], 1);
  EXPECT_TRUE(ok(c.post_json(api + "/delete", {{"name", a}})));
  EXPECT_FALSE(client_->inspect_container(a).ok());
  std::string restored = prefix_ + "-restored";
  auto rs = c.post_json(api + "/restore-snapshot", {{"snapshot_name", snap},
                                                    {"name", restored},
                                                    {"gpu_count", 1},
                                                    {"port", {std::to_string(p1 + 10) + ":3003"}}});
  ASSERT_TRUE(ok(rs)) << rs.body;
  EXPECT_EQ(rs.json()["data"]["gpu_devices"], Json::array({0}));
  auto cat = client_->exec(restored, {"cat", "/root/marker"});
  ASSERT_TRUE(cat.ok());
  EXPECT_EQ(cat->out, "kept\n");

  // Back up, delete, restore from the backup with two GPUs.
  std::string bk = prefix_ + "-backup-v1";
  auto bkr = c.post_json(api + "/backup", {{"name", b}, {"backup_name", bk}});
  ASSERT_TRUE(ok(bkr)) << bkr.body;
  EXPECT_TRUE(std::filesystem::exists(svc_->backup_dir() / ("backup_" + bk + ".tar")));
  // The hash a user's `sha256sum backup_x.tar` prints; the inner image.tar's has its own name.
  auto file_sha = sha256_file((svc_->backup_dir() / ("backup_" + bk + ".tar")).string());
  ASSERT_TRUE(file_sha.ok());
  EXPECT_EQ(bkr.json()["data"]["sha256"], *file_sha) << bkr.body;
  EXPECT_EQ(bkr.json()["data"]["image_sha256"].get<std::string>().size(), 64u);
  EXPECT_NE(bkr.json()["data"]["image_sha256"], *file_sha);
  EXPECT_TRUE(ok(c.post_json(api + "/delete", {{"name", b}})));
  std::string dual = prefix_ + "-dual";
  auto rr = c.post_json(api + "/restore", {{"backup_path", bk + ".tar"},
                                           {"name", dual},
                                           {"gpu_count", 2},
                                           {"port", {std::to_string(p2 + 10) + ":3004"}}});
  ASSERT_TRUE(ok(rr)) << rr.body;
  EXPECT_EQ(rr.json()["data"]["gpu_devices"].size(), 2u);
  auto st2 = c.get(api + "/status");
  EXPECT_EQ(st2.json()["data"]["used_gpu_indices"].size(), 3u);
  EXPECT_EQ(st2.json()["data"]["container_gpu_mapping"][dual].size(), 2u);

  // GPU count change keeps the writable layer (commit -> recreate).
  ASSERT_TRUE(client_->exec(restored, {"sh", "-c", "echo still-here > /root/layer"}).ok());
  auto up = c.post_json(api + "/update-resources", {{"name", restored}, {"gpu_count", 0}});
  ASSERT_TRUE(ok(up)) << up.body;
  EXPECT_EQ(up.json()["data"]["gpu_devices"], Json::array());
  EXPECT_EQ(up.json()["data"]["status"], "running") << up.body;
  EXPECT_EQ(client_->exec(restored, {"cat", "/root/layer"})->out, "still-here\n");
  EXPECT_EQ(c.get(api + "/status").json()["data"]["used_gpu_indices"].size(), 2u);
  auto metrics = c.get("/metrics");
  EXPECT_NE(metrics.body.find("gpulab_gpu_allocated"), std::string::npos);
  EXPECT_TRUE(c.get("/api/v1/openapi.json").json()["paths"].contains(api + "/create"));
}

TEST_F(ServiceApi, SshLoginWithReturnedPassword) {
  if (!which("sshpass") || !which("ssh")) GTEST_SKIP() << "needs sshpass and an ssh client";
  int base = unique_port_base();
  Json cfg = four_gpu_config(engine_->host, base);
  start_service(cfg, true);
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  std::string name = prefix_ + "-ssh";
  auto r = c.post_json("/api/v1/gpu-docker/create",
                       {{"name", name}, {"image", kSshImage}, {"gpu_count", 1}});
  ASSERT_TRUE(ok(r)) << r.body;
  std::string pw = r.json()["data"]["ssh_password"];
  int port = r.json()["data"]["ssh_port"];
  ProcessResult last;
  for (int attempt = 0; attempt < 30; ++attempt) {
    auto p = run_process({"sshpass", "-p", pw, "ssh", "-o", "StrictHostKeyChecking=no", "-o",
                          "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-p",
                          std::to_string(port), "root@127.0.0.1",
                          "echo login-ok $(hostname) $GPULAB_GPU_UUIDS"});
    ASSERT_TRUE(p.ok());
    last = *p;
    if (last.success()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  ASSERT_TRUE(last.success()) << last.err;
  EXPECT_NE(last.out.find("login-ok " + name + " GPU-fake-0"), std::string::npos) << last.out;
  // A wrong password is refused.
  auto bad = run_process({"sshpass", "-p", "wrong-password", "ssh", "-o",
                          "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-p",
                          std::to_string(port), "root@127.0.0.1", "true"});
  ASSERT_TRUE(bad.ok());
  EXPECT_FALSE(bad->success());
}

TEST_F(ServiceApi, RefusalsCreateNothing) {
  int base = unique_port_base();
  Json cfg = four_gpu_config(engine_->host, base);
  cfg["auth_required"] = true;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  std::string alice = svc_->add_user("alice", false);
  std::string bob = svc_->add_user("bob", false);
  ASSERT_FALSE(alice.empty());
  HttpClient c(svc_->url(), alice);
  const std::string create = "/api/v1/gpu-docker/create";
  auto expect = [&](const HttpResult& r, const std::string& want) {
    EXPECT_EQ(code(r), want) << r.body;
    EXPECT_FALSE(r.json().value("success", true));
  };
  Json good = {{"name", prefix_ + "-ok"}, {"image", kBoxImage}, {"gpu_count", 1}};
  Json j = good;
  j["privileged"] = true;
  expect(c.post_json(create, j), "INVALID_REQUEST");
  j = good;
  j["volumes"] = {"/:/host"};
  expect(c.post_json(create, j), "INVALID_REQUEST");
  j = good;
  j["binds"] = {"/etc:/etc"};
  expect(c.post_json(create, j), "INVALID_REQUEST");
  j = good;
  j["devices"] = {"/dev/mem"};
  expect(c.post_json(create, j), "INVALID_REQUEST");
  j = good;
  j["network_mode"] = "host";
  expect(c.post_json(create, j), "INVALID_REQUEST");
  j = good;
  j["image"] = "busybox:latest";
  expect(c.post_json(create, j), "IMAGE_NOT_ALLOWED");  // outside the allowlist
  j = good;
  j["image"] = "gpulab-test/not-on-engine:1";
  expect(c.post_json(create, j), "IMAGE_NOT_ALLOWED");  // allowed pattern, but no pulls
  expect(c.post(create, "{\"name\": \"x\", "), "INVALID_REQUEST");
  for (std::string bad_name : {"a/b", "has space", "../up", ""}) {
    j = good;
    j["name"] = bad_name;
    expect(c.post_json(create, j), "INVALID_REQUEST");
  }
  // One character: Docker's names need two; refused before anything is booked, saying so.
  j = good;
  j["name"] = "z";
  auto one = c.post_json(create, j);
  expect(one, "INVALID_REQUEST");
  EXPECT_NE(one.body.find("2-64"), std::string::npos) << one.body;
  for (std::string bad_port : {"70000:22", "0:22", "22:99999", "x:y"}) {
    j = good;
    j["port"] = {bad_port};
    expect(c.post_json(create, j), "INVALID_REQUEST");
  }
  auto big = c.post_zeros(create, 100ll << 20);
  EXPECT_EQ(big.status, 413);
  expect(big, "PAYLOAD_TOO_LARGE");
  HttpClient anon(svc_->url());
  expect(anon.post_json(create, good), "UNAUTHORIZED");
  HttpClient wrong(svc_->url(), "glt_wrong");
  expect(wrong.post_json(create, good), "UNAUTHORIZED");
  expect(wrong.get("/api/v1/gpu-docker/list"), "UNAUTHORIZED");
  EXPECT_EQ(engine_managed_count(prefix_), 0);

  // Another user's container: invisible in lists, untouchable.
  ASSERT_TRUE(ok(c.post_json(create, good)));
  HttpClient bc(svc_->url(), bob);
  EXPECT_EQ(bc.get("/api/v1/gpu-docker/list").json()["data"]["total"], 0);
  expect(bc.post_json("/api/v1/gpu-docker/delete", {{"name", good["name"]}}), "FORBIDDEN");
  expect(bc.post_json("/api/v1/gpu-docker/stop", {{"name", good["name"]}}), "FORBIDDEN");
  expect(bc.post_json("/api/v1/gpu-docker/snapshot",
                      {{"name", good["name"]}, {"snapshot_name", prefix_ + "s"}}),
         "FORBIDDEN");
  EXPECT_TRUE(client_->inspect_container(good["name"].get<std::string>())->running);

  // A corrupted backup is refused on upload and on restore.
  auto bkp = c.post_json("/api/v1/gpu-docker/backup",
                         {{"name", good["name"]}, {"backup_name", prefix_ + "-bk"}});
  ASSERT_TRUE(ok(bkp)) << bkp.body;
  auto file = svc_->backup_dir() / ("backup_" + prefix_ + "-bk.tar");
  auto copy = dir_ / "corrupt.tar";
  std::filesystem::copy_file(file, copy);
  {
    std::fstream f(copy, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096);
    f.put('\x5a');
    f.put('\xa5');
  }
  auto corrupt = c.put_file("/api/v1/gpu-docker/backups/upload?backup_name=" + prefix_ + "-bad",
                            copy.string());
  expect(corrupt, "BACKUP_CORRUPT");
  // Named as the backup the user uploads, not the service's temporary .partial file.
  EXPECT_NE(corrupt.body.find("backup_" + prefix_ + "-bad.tar"), std::string::npos) << corrupt.body;
  EXPECT_EQ(corrupt.body.find(".partial"), std::string::npos) << corrupt.body;
  EXPECT_FALSE(std::filesystem::exists(svc_->backup_dir() / ("backup_" + prefix_ + "-bad.tar")));
  std::filesystem::copy_file(copy, svc_->backup_dir() / ("backup_" + prefix_ + "-hand.tar"));
  HttpClient admin(svc_->url(), svc_->add_user("root-admin", true));
  expect(admin.post_json("/api/v1/gpu-docker/restore", {{"backup_path", prefix_ + "-hand.tar"},
                                                        {"name", prefix_ + "-fromcorrupt"}}),
         "BACKUP_CORRUPT");
  expect(c.post_json("/api/v1/gpu-docker/restore",
                     {{"backup_path", "../etc/passwd"}, {"name", prefix_ + "-y"}}),
         "INVALID_REQUEST");
  EXPECT_EQ(engine_managed_count(prefix_), 1);  // only the one good container
}

TEST_F(ServiceApi, ListeningBeyondLoopbackForcesTokens) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["listen"] = "0.0.0.0:0";
  cfg["insecure_http"] = true;   // plain HTTP off loopback must be asked for (tls_test.cpp)
  cfg["auth_required"] = false;  // asked for, but not granted off loopback
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient anon(svc_->url());
  auto r = anon.get("/api/v1/gpu-docker/list");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(code(r), "UNAUTHORIZED");
  HttpClient c(svc_->url(), svc_->add_user("carol", false));
  EXPECT_TRUE(ok(c.get("/api/v1/gpu-docker/list")));
}

TEST_F(ServiceApi, BackupDoesNotHoldOtherRequestsAndShowsProgress) {
  start_service(four_gpu_config(engine_->host, unique_port_base()), true);
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  std::string name = prefix_ + "-big";
  ASSERT_TRUE(ok(c.post_json("/api/v1/gpu-docker/create", {{"name", name}, {"image", kSshImage}})));
  // Some bulk in the writable layer, so the backup takes a while.
  ASSERT_TRUE(
      client_->exec(name, {"sh", "-c", "head -c 200000000 /dev/urandom > /root/bulk"}).ok());
  std::atomic<bool> done{false};
  HttpResult backup;
  auto t0 = std::chrono::steady_clock::now();
  std::thread t([&] {
    HttpClient b(svc_->url());
    backup = b.post_json("/api/v1/gpu-docker/backup",
                         {{"name", name}, {"backup_name", prefix_ + "-big"}});
    done = true;
  });
  double worst = 0;
  int polls = 0;
  std::int64_t progress_seen = 0;
  while (!done) {
    auto q0 = std::chrono::steady_clock::now();
    auto st = c.get("/api/v1/gpu-docker/status");
    auto bl = c.get("/api/v1/gpu-docker/backups");
    worst = std::max(worst,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - q0).count());
    EXPECT_TRUE(ok(st));
    Json listing = bl.json();  // keep the document alive while iterating it
    for (const auto& b : listing["data"]["backups"])
      if (b["state"] == "running")
        progress_seen = std::max(progress_seen, b["bytes_done"].get<std::int64_t>());
    ++polls;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  t.join();
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(ok(backup)) << backup.body;
  std::printf(
      "[ figures  ] backup of %lld bytes took %.2f s; %d status+backups polls meanwhile, "
      "slowest %.3f s; progress seen %lld bytes\n",
      static_cast<long long>(backup.json()["data"]["size_bytes"].get<std::int64_t>()), total, polls,
      worst, static_cast<long long>(progress_seen));
  EXPECT_LT(worst, 2.0);
  EXPECT_GT(polls, 1);
  EXPECT_GT(progress_seen, 0);
}

}  // namespace
}  // namespace gpulab::service::testing
