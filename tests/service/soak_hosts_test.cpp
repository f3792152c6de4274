// Soak at three hosts under both kinds of fault: users' random walks (soak_support.h) against a
// service over the three lab dockerds (lab_service_test.h) while, round by round, either the
// service is SIGKILLed and restarted or one lab dockerd is SIGKILLed and brought back with
// start-lab-hosts.sh. Invariants per host after each fault and at the end (soak_violations):
// no GPU or host port booked twice on one host, the book equals every up engine, a down host's
// containers show unreachable and keep their GPUs, book == engine again once the host is back
// and reconciled, no orphan container or image, quotas summed over hosts. `make test` runs a
// short one; `make soak SOAK_HOSTS=3` the long one (GPULAB_SOAK_HOSTS_OPS, _KILLS, _USERS).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <random>
#include <set>
#include <thread>

#include "lab_service_test.h"

namespace gpulab::service::testing {
namespace {

enum class Fault { kNone, kService, kEngine };

class SoakHosts : public LabServiceTest {
 protected:
  // What /list and /gpus show of a down host: every container there unreachable, and every GPU
  // the book gives them still allocated.
  std::vector<std::string> down_host_views(const std::string& admin, const std::string& host) {
    std::vector<std::string> v;
    HttpClient c(svc_->url(), admin);
    auto list = c.get(kApi + "/list");
    auto gpus = c.get(kApi + "/gpus");
    if (!ok(list) || !ok(gpus)) return {"list or gpus refused while " + host + " is down"};
    std::set<std::string> booked, allocated;
    Json l = list.json(), g = gpus.json();
    for (const auto& x : l["data"]["containers"]) {
      if (x["host"] != host) continue;
      if (x["status"] != "unreachable" || x["host_state"] != "down")
        v.push_back(x["name"].get<std::string>() + " on down " + host + " shows " +
                    x["status"].get<std::string>());
      for (const auto& u : x["gpu_uuids"]) booked.insert(u);
    }
    for (const auto& x : g["data"]["gpus"])
      if (x.value("allocated", false)) allocated.insert(x.value("uuid", std::string()));
    for (const auto& u : booked)
      if (!allocated.count(u)) v.push_back("GPU " + u + " on down " + host + " shown free");
    return v;
  }
};

TEST_F(SoakHosts, RandomOperationsWhileServiceAndEnginesAreKilled) {
  const long total = soak_env("GPULAB_SOAK_HOSTS_OPS", 72);
  const long kills = soak_env("GPULAB_SOAK_HOSTS_KILLS", 2);
  const int users = static_cast<int>(soak_env("GPULAB_SOAK_HOSTS_USERS", 6));
  const unsigned seed = static_cast<unsigned>(soak_env("GPULAB_SOAK_SEED", std::random_device{}()));
  start_service(lab_config());
  if (HasFatalFailure()) return;
  std::string admin = svc_->add_user("soak-admin", true);
  HttpClient a(svc_->url(), admin);
  ASSERT_TRUE(ok(a.post_json(kApi + "/quotas", {{"user", "*"},
                                                {"max_gpus", kSoakQuota.max_gpus},
                                                {"max_containers", kSoakQuota.max_containers}})));
  std::vector<std::unique_ptr<SoakWalker>> walkers;
  for (int u = 0; u < users; ++u)
    walkers.push_back(std::make_unique<SoakWalker>(
        u, svc_->add_user("soak" + std::to_string(u), false), prefix_, seed + u, kBoxImage));
  std::printf("soak3: %ld operations, %ld kills, %d users, seed %u\n", total, kills, users, seed);
  SoakCounts n;
  SoakTally t;
  long service_kills = 0, engine_kills = 0;
  std::mt19937 rng(seed);
  auto check = [&](const char* when, int down) {
    wait_backups(svc_->url(), admin);
    // With several hosts the reconciler's periodic pass runs every 5 s (at least).
    soak_check(
        when, [&] { return soak_violations(soak_hosts(down), *svc_, prefix_, kSoakQuota); },
        std::chrono::seconds(7), t);
  };
  for (long round = 0; round <= kills; ++round) {
    long begin = n.ops.load(), target = total * (round + 1) / (kills + 1);
    // Alternate the kinds so any run of two kills or more has both.
    Fault fault = round == kills            ? Fault::kNone
                  : (round + seed) % 2 == 0 ? Fault::kEngine
                                            : Fault::kService;
    int victim = std::uniform_int_distribution<int>(0, 2)(rng);
    long kill_at = std::uniform_int_distribution<long>(begin + 1, std::max(begin + 1, target))(rng);
    std::atomic<bool> stop{false}, killed{false};
    std::string url = svc_->url();
    std::vector<std::thread> threads;
    for (auto& w : walkers)
      threads.emplace_back([&, wp = w.get()] {
        wp->round(url, n, target, stop, [&](long k) {
          if (fault == Fault::kNone || k < kill_at || killed.exchange(true)) return;
          if (fault == Fault::kService) {
            stop = true;  // the others would spend the round on a closed port
            svc_->kill_hard();
          } else {
            // The walk goes on with the host gone: creates go elsewhere, its containers 503.
            ::kill(lab_engine_pid(lab_.engines[victim]), SIGKILL);
          }
        });
      });
    for (auto& th : threads) th.join();
    if (killed && fault == Fault::kService) {
      ++service_kills;
      ASSERT_TRUE(svc_->start()) << svc_->log_tail();
      check("after a service restart", -1);
    } else if (killed && fault == Fault::kEngine) {
      ++engine_kills;
      const std::string name = lab_.engines[victim].name;
      HttpClient now(svc_->url(), admin);  // the service's port changes when it restarts
      ASSERT_TRUE(wait_host(now, name, "down", 30)) << name << " not marked down";
      check("engine down", victim);
      for (const auto& msg : down_host_views(admin, name)) {
        ++t.violations;
        std::printf("soak3: VIOLATION (engine down): %s\n", msg.c_str());
      }
      std::string err;
      ASSERT_TRUE(restart_engines(&err)) << err;
      ASSERT_TRUE(wait_host(now, name, "up", 30)) << name << " not marked up again";
      check("engine back", -1);
    }
    std::printf("soak3: round %ld (%s): %ld operations so far, %ld checks, %ld violations\n", round,
                fault == Fault::kService  ? "service kill"
                : fault == Fault::kEngine ? ("engine kill: " + lab_.engines[victim].name).c_str()
                                          : "no fault",
                n.ops.load(), t.checks, t.violations);
  }
  check("at the end", -1);
  std::printf(
      "soak3: operations %ld (ok %ld, refused %ld, cut by a kill %ld, internal errors %ld), "
      "service kills %ld, engine kills %ld, invariant checks %ld, violations %ld (settled by the "
      "reconciler within its interval: %ld)\n",
      n.ops.load(), n.ok.load(), n.refused.load(), n.cut.load(), n.internal.load(), service_kills,
      engine_kills, t.checks, t.violations, t.settled);
  // What the service said of its passes: a violation's cause is in there, not in the test.
  EXPECT_EQ(t.violations, 0) << "the service's warnings:\n" << svc_->log_lines("warn");
  EXPECT_EQ(service_kills + engine_kills, kills);
  if (kills >= 2) {
    EXPECT_GT(service_kills, 0);
    EXPECT_GT(engine_kills, 0);
  }
  EXPECT_GT(n.ok.load(), total / 10);  // the mix did real work, not only refusals
}

}  // namespace
}  // namespace gpulab::service::testing
