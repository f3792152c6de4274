// Quotas through the service's API on fake engines (fake_lab.h: quota arithmetic needs no Docker
// engine): a race of 50 concurrent creates under a 3-GPU limit, every kind of limit refused with
// QUOTA_EXCEEDED and nothing made, admins-only setting through the API and the CLI, usage in
// status/list, and GPU-seconds on /metrics.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/subprocess.h"
#include "fake_lab.h"

namespace gpulab::service::testing {
namespace {

// One host of eight GPUs, tokens required.
std::unique_ptr<FakeLab> eight_gpu_lab() {
  return std::make_unique<FakeLab>(std::vector<FakeLab::HostSpec>{{"", 8}},
                                   [](ServiceConfig& cfg) { cfg.auth_required = true; });
}

const std::string kPrefix = "q";  // the containers' names start with it

TEST(Quota, FiftyConcurrentCreatesUnderAThreeGpuLimit) {
  auto lab = eight_gpu_lab();
  LabClient admin(*lab, lab->add_user("boss", true));
  std::string alice = lab->add_user("alice", false);
  auto set = admin.post_json(kApi + "/quotas", {{"user", "alice"}, {"max_gpus", 3}});
  ASSERT_TRUE(ok(set)) << set.body;
  EXPECT_EQ(set.json()["data"]["limits"]["max_gpus"], 3);

  constexpr int kCreates = 50;
  std::atomic<int> created{0}, refused{0}, other{0};
  std::vector<std::string> hints(kCreates);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCreates; ++i)
    threads.emplace_back([&, i] {
      LabClient c(*lab, alice);
      auto r = c.post_json(
          kApi + "/create",
          {{"name", kPrefix + "-r" + std::to_string(i)}, {"image", kFakeImage}, {"gpu_count", 1}});
      if (ok(r)) {
        ++created;
      } else if (code(r) == "QUOTA_EXCEEDED") {
        ++refused;
        hints[i] = r.json().value("hint", std::string());
      } else {
        ++other;
        ADD_FAILURE() << r.status << " " << r.body;
      }
    });
  for (auto& t : threads) t.join();
  std::printf("quota race: %d created, %d QUOTA_EXCEEDED, %d other\n", created.load(),
              refused.load(), other.load());
  EXPECT_EQ(created.load(), 3);
  EXPECT_EQ(refused.load(), 47);
  EXPECT_EQ(other.load(), 0);
  for (const auto& h : hints) {
    if (!h.empty()) {
      EXPECT_NE(h.find("in use 3 of 3 GPUs"), std::string::npos) << h;
    }
  }
  EXPECT_EQ(lab->engine_container_count(kPrefix), 3);

  LabClient ac(*lab, alice);
  auto status = ac.get(kApi + "/status");
  ASSERT_TRUE(ok(status)) << status.body;
  EXPECT_EQ(status.json()["data"]["used_gpu_indices"].size(), 3u);
  EXPECT_EQ(status.json()["data"]["quota"]["usage"]["gpus"], 3);
  EXPECT_EQ(status.json()["data"]["quota"]["limits"]["max_gpus"], 3);
  auto list = ac.get(kApi + "/list");
  EXPECT_EQ(list.json()["data"]["total"], 3);
  EXPECT_EQ(list.json()["data"]["quota"]["usage"]["containers"], 3);

  // Metering: each later allocation charged the holders; alice's own view names her containers.
  auto metrics = ac.get("/metrics");
  EXPECT_NE(metrics.body.find("gpulab_gpu_seconds_total{user=\"alice\"}"), std::string::npos)
      << metrics.body;
  EXPECT_NE(metrics.body.find("gpulab_container_gpu_seconds_total{user=\"alice\",container=\"" +
                              kPrefix + "-r"),
            std::string::npos);

  // A 0-GPU container still fits; deleting one frees a GPU for the next.
  auto zero = ac.post_json(kApi + "/create",
                           {{"name", kPrefix + "-zero"}, {"image", kFakeImage}, {"gpu_count", 0}});
  EXPECT_TRUE(ok(zero)) << zero.body;
  std::string first = list.json()["data"]["containers"][0]["name"];
  ASSERT_TRUE(ok(ac.post_json(kApi + "/delete", {{"name", first}})));
  auto again = ac.post_json(
      kApi + "/create", {{"name", kPrefix + "-again"}, {"image", kFakeImage}, {"gpu_count", 1}});
  EXPECT_TRUE(ok(again)) << again.body;
  // Growing a container past the limit through update-resources is refused too.
  auto grow =
      ac.post_json(kApi + "/update-resources", {{"name", kPrefix + "-zero"}, {"gpu_count", 1}});
  EXPECT_EQ(code(grow), "QUOTA_EXCEEDED") << grow.body;
}

TEST(Quota, EveryLimitRefusesAndOnlyAdminsSetThem) {
  auto lab = eight_gpu_lab();
  LabClient admin(*lab, lab->add_user("boss", true));
  LabClient bob(*lab, lab->add_user("bob", false));
  // Users read their own quota but may not set any.
  EXPECT_TRUE(ok(bob.get(kApi + "/quotas")));
  EXPECT_EQ(code(bob.post_json(kApi + "/quotas", {{"user", "bob"}, {"max_gpus", 99}})),
            "FORBIDDEN");
  for (Json bad :
       {Json{{"user", "bob"}, {"max_gpus", -5}}, Json{{"user", "bob"}, {"max_memory", "lots"}},
        Json{{"user", "bob"}, {"period_hours", 0}}, Json{{"user", "a/b"}, {"max_gpus", 1}},
        Json{{"user", "bob"}, {"max_gpus", 1}, {"colour", "red"}}})
    EXPECT_EQ(code(admin.post_json(kApi + "/quotas", bad)), "INVALID_REQUEST") << bad.dump();

  // The default for everyone, set through the CLI on the same book, then bob's own override.
  auto cli = run_process({GPULAB_BINARY, "serve", "--db", lab->db_path().string(), "--set-quota",
                          "*:max_containers=2,max_cpus=3,max_memory=512m"});
  ASSERT_TRUE(cli.ok() && cli->success()) << (cli.ok() ? cli->err : "");
  auto bad_cli = run_process(
      {GPULAB_BINARY, "serve", "--db", lab->db_path().string(), "--set-quota", "nouser-no-colon"});
  ASSERT_TRUE(bad_cli.ok());
  EXPECT_EQ(bad_cli->exit_code, 2);
  EXPECT_NE(bad_cli->err.find("hint:"), std::string::npos) << bad_cli->err;
  auto q = bob.get(kApi + "/quotas").json()["data"];
  EXPECT_EQ(q["limits"]["max_containers"], 2);
  EXPECT_EQ(q["limits"]["max_memory_bytes"], 512ll << 20);

  auto create = [&](const std::string& n, Json extra) {
    Json j = {{"name", kPrefix + n}, {"image", kFakeImage}};
    j.update(extra);
    return bob.post_json(kApi + "/create", j);
  };
  auto nolimit = create("-nocpu", {{"memory", "64m"}});
  EXPECT_EQ(code(nolimit), "QUOTA_EXCEEDED");  // under a CPU quota, cpus must be given
  ASSERT_TRUE(ok(create("-a", {{"cpus", "2"}, {"memory", "256m"}})));
  auto cpu = create("-b", {{"cpus", "1.5"}, {"memory", "64m"}});
  EXPECT_EQ(code(cpu), "QUOTA_EXCEEDED");
  EXPECT_NE(cpu.json().value("hint", std::string()).find("in use 2 of 3 CPUs"), std::string::npos)
      << cpu.body;
  auto mem = create("-c", {{"cpus", "1"}, {"memory", "300m"}});
  EXPECT_EQ(code(mem), "QUOTA_EXCEEDED") << mem.body;
  ASSERT_TRUE(ok(create("-d", {{"cpus", "1"}, {"memory", "256m"}})));
  auto third = create("-e", {{"cpus", "0.1"}, {"memory", "8m"}});
  EXPECT_EQ(code(third), "QUOTA_EXCEEDED");
  EXPECT_NE(third.body.find("containers"), std::string::npos);
  auto upd = bob.post_json(kApi + "/update-resources", {{"name", kPrefix + "-a"}, {"cpus", "3"}});
  EXPECT_EQ(code(upd), "QUOTA_EXCEEDED") << upd.body;
  EXPECT_EQ(lab->engine_container_count(kPrefix), 2);

  // bob's own limit lifts the default's container cap; the GPU-hour limit refuses GPUs only.
  ASSERT_TRUE(ok(admin.post_json(kApi + "/quotas", {{"user", "bob"},
                                                    {"max_containers", -1},
                                                    {"max_cpus", 8},
                                                    {"max_memory", "1g"},
                                                    {"max_gpu_hours", 0}})));
  auto gpu = create("-g", {{"cpus", "0.1"}, {"memory", "8m"}, {"gpu_count", 1}});
  EXPECT_EQ(code(gpu), "QUOTA_EXCEEDED") << gpu.body;
  EXPECT_NE(gpu.body.find("GPU-hours"), std::string::npos);
  EXPECT_TRUE(ok(create("-h", {{"cpus", "0.1"}, {"memory", "8m"}, {"gpu_count", 0}})));
  auto all = admin.get(kApi + "/quotas").json()["data"];
  EXPECT_EQ(all["default"]["max_containers"], 2);
  bool saw_bob = false;
  for (const auto& u : all["users"])
    if (u["user"] == "bob") {
      saw_bob = true;
      EXPECT_TRUE(u["limits"]["max_containers"].is_null());  // unlimited over the default
      EXPECT_EQ(u["usage"]["containers"], 3);
    }
  EXPECT_TRUE(saw_bob);
}

}  // namespace
}  // namespace gpulab::service::testing
