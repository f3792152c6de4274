// Soak under faults: 10 users drive a random mix of create / start / stop / restart / delete /
// update-resources / snapshot / restore-snapshot / backup / restore against the real service and
// dockerd while the service is SIGKILLed at random points and restarted. After every restart and
// at the end the invariants are checked: no GPU or SSH port held twice, the book equals the
// engine's containers (names and running state), no orphan container, lease, port, image or
// temporary file, no quota exceeded. `make test` runs a short version; `make soak` the long one
// (GPULAB_SOAK_OPS, GPULAB_SOAK_KILLS, GPULAB_SOAK_USERS set the size).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "service_env.h"
#include "soak_support.h"

namespace gpulab::service::testing {
namespace {

class Soak : public ServiceTest {};

TEST_F(Soak, RandomOperationsWhileTheServiceIsKilled) {
  const long total = soak_env("GPULAB_SOAK_OPS", 150);
  const long kills = soak_env("GPULAB_SOAK_KILLS", 3);
  const int users = static_cast<int>(soak_env("GPULAB_SOAK_USERS", 10));
  const unsigned seed = static_cast<unsigned>(soak_env("GPULAB_SOAK_SEED", std::random_device{}()));
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  Json gpus = Json::array();
  for (int i = 0; i < 8; ++i)
    gpus.push_back({{"uuid", "GPU-soak-" + std::to_string(i)}, {"index", i}, {"vendor", "nvidia"}});
  cfg["gpus"] = gpus;
  cfg["auth_required"] = true;
  cfg["stop_timeout_seconds"] = 1;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  std::string admin = svc_->add_user("soak-admin", true);
  {
    HttpClient a(svc_->url(), admin);
    ASSERT_TRUE(ok(a.post_json(kApi + "/quotas", {{"user", "*"},
                                                  {"max_gpus", kSoakQuota.max_gpus},
                                                  {"max_containers", kSoakQuota.max_containers}})));
  }
  std::vector<std::unique_ptr<SoakWalker>> walkers;
  for (int u = 0; u < users; ++u)
    walkers.push_back(std::make_unique<SoakWalker>(
        u, svc_->add_user("soak" + std::to_string(u), false), prefix_, seed + u, kBoxImage));
  std::printf("soak: %ld operations, %ld kills, %d users, seed %u\n", total, kills, users, seed);
  SoakCounts n;
  long done_kills = 0;
  SoakTally t;
  std::mt19937 rng(seed);
  const std::vector<SoakHost> hosts = {{"local", &*client_}};
  auto check = [&](const char* when) {
    wait_backups(svc_->url(), admin);
    // The reconciler's periodic pass runs every 6 s here.
    soak_check(
        when, [&] { return soak_violations(hosts, *svc_, prefix_, kSoakQuota); },
        std::chrono::seconds(8), t);
  };
  for (long round = 0; round <= kills; ++round) {
    long begin = n.ops.load(), target = total * (round + 1) / (kills + 1);
    long kill_at = round < kills ? std::uniform_int_distribution<long>(begin + 1, target)(rng) : -1;
    std::atomic<bool> stop{false};
    std::atomic<bool> killed{false};
    std::string url = svc_->url();
    std::vector<std::thread> threads;
    for (auto& w : walkers)
      threads.emplace_back([&, wp = w.get()] {
        wp->round(url, n, target, stop, [&](long k) {
          if (kill_at > 0 && k >= kill_at && !killed.exchange(true)) {
            // Stop first: while the kill reaps, the others would otherwise spend the round's
            // operations on a closed port. Their requests in flight are still cut.
            stop = true;
            svc_->kill_hard();  // at a random point: other users' requests are in flight
          }
        });
      });
    for (auto& t : threads) t.join();
    if (killed) {
      ++done_kills;
      ASSERT_TRUE(svc_->start()) << svc_->log_tail();
      check("after restart");
    }
    std::printf("soak: round %ld: %ld operations so far, %ld kills, %ld checks, %ld violations\n",
                round, n.ops.load(), done_kills, t.checks, t.violations);
  }
  check("at the end");
  std::printf(
      "soak: operations %ld (ok %ld, refused %ld, cut by a kill %ld, internal errors %ld), "
      "kills %ld, invariant checks %ld, violations %ld (settled by the reconciler within its "
      "interval: %ld)\n",
      n.ops.load(), n.ok.load(), n.refused.load(), n.cut.load(), n.internal.load(), done_kills,
      t.checks, t.violations, t.settled);
  EXPECT_EQ(t.violations, 0);
  EXPECT_EQ(done_kills, kills);
  EXPECT_GT(n.ok.load(), total / 10);  // the mix did real work, not only refusals
}

}  // namespace
}  // namespace gpulab::service::testing
