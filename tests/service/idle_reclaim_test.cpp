// Idle reclaim on a real dockerd with an injected clock and GPU samples fed in by the test (on
// declared GPUs): every container idle past the policy is warned, then stopped at the first
// check past its deadline; busy ones (a GPU in use, network traffic), one with an open SSH
// connection and one whose owner's policy is off keep running; "release_gpus" gives the GPUs back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <limits>
#include <random>

#include "core/strings.h"
#include "service/ops/containers/container_ops.h"
#include "service/ops/policies/idle_reclaim.h"
#include "service/ops/policies/proc_net.h"
#include "service/ops/policies/quota.h"
#include "service/ops/policies/usage_meter.h"
#include "service/store/user_policy.h"
#include "service_env.h"

namespace gpulab::service::testing {
namespace {

class IdleReclaim : public ServiceTest {};

TEST(IdleReclaimParse, CountsEstablishedSessionsOnPort22) {
  const std::string tcp =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
      "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0\n"
      "   1: 0100007F:0016 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0\n"
      "   2: 0100007F:A1B2 0100007F:0016 01 00000000:00000000 00:00000000 00000000     0\n"
      "   3: 0100007F:1F90 0100007F:C000 01 00000000:00000000 00:00000000 00000000     0\n";
  EXPECT_EQ(ssh_sessions_in(tcp), 1);  // the listener (0A) and the client side do not count
  EXPECT_EQ(ssh_sessions_in(""), 0);
}

TEST(IdleReclaimParse, SumsNetworkBytesOfEveryInterfaceButLoopback) {
  // /proc/net/dev as the idle check reads it: followed by /proc/net/tcp in the same output.
  const std::string dev =
      "Inter-|   Receive                                                |  Transmit\n"
      " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs "
      "drop fifo colls carrier compressed\n"
      "    lo: 9000000     100    0    0    0     0          0         0  9000000     100    0 "
      "   0    0     0       0          0\n"
      "  eth0:    1000      10    0    0    0     0          0         0      200       2    0 "
      "   0    0     0       0          0\n"
      "  eth1:30 1 0 0 0 0 0 0 4 1 0 0 0 0 0 0\n"
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
      "   0: 0100007F:0016 0100007F:A1B2 01 00000000:00000000 00:00000000 00000000     0\n";
  EXPECT_EQ(net_bytes_in(dev), 1000 + 200 + 30 + 4);  // lo left out, as the engine's stats do
  EXPECT_EQ(ssh_sessions_in(dev), 1);                 // the dev rows are no TCP rows
  EXPECT_EQ(net_bytes_in("  lo: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n"), 0);  // no network: 0
  // Not /proc/net/dev: nothing known, so the checker asks the engine instead.
  EXPECT_EQ(net_bytes_in(""), std::nullopt);
  EXPECT_EQ(net_bytes_in("cat: can't open '/proc/net/dev': No such file or directory\n"),
            std::nullopt);
  EXPECT_EQ(net_bytes_in("eth0: 1 2 3\n"), std::nullopt);  // short
  EXPECT_EQ(net_bytes_in("eth0: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n"), std::nullopt);
  EXPECT_EQ(net_bytes_in("eth0: -1 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0\n"), std::nullopt);
  // Counters past int64 saturate instead of overflowing.
  const std::string huge =
      "a: 9223372036854775807 0 0 0 0 0 0 0 9223372036854775807 0 0 0 0 0 0 0\n";
  EXPECT_EQ(net_bytes_in(huge + huge), std::numeric_limits<std::int64_t>::max());
  EXPECT_EQ(net_bytes_in("a: 99999999999999999999 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"), std::nullopt);
}

TEST(IdleReclaimParse, GarbageNeverCrashes) {
  // Random bytes, and random splices of real rows: any answer is fine, a crash is not (ASan and
  // UBSan builds check the overflow paths too). Seeded: a failure repeats.
  const std::string rows =
      "  eth0: 1000 10 0 0 0 0 0 0 200 2 0 0 0 0 0 0\n   0: 0100007F:0016 0100007F:A1B2 01 0\n";
  std::mt19937 rng(45);
  for (int i = 0; i < 2000; ++i) {
    std::string text(rng() % 300, '\0');
    for (auto& ch : text)
      ch = rng() % 2 ? rows[rng() % rows.size()] : static_cast<char>(rng() % 256);
    auto bytes = net_bytes_in(text);
    if (bytes) {
      EXPECT_GE(*bytes, 0);
    }
    EXPECT_GE(ssh_sessions_in(text), 0);
  }
}

TEST(UsageMeter, ChargesHeldGpusByHourAndSurvivesReopening) {
  auto dir = std::filesystem::temp_directory_path() / ("gpulab-meter-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const double t0 = 1.7e9;  // an hour boundary (1.7e9 = 472222 h + 800 s); the split is checked
  {
    auto store = Store::open((dir / "m.db").string());
    ASSERT_TRUE(store.ok());
    Store& st = **store;
    meter_tick(st, t0);  // starts the meter
    ContainerRecord rec;
    rec.name = "c1";
    rec.owner = "alice";
    rec.state = state::kRunning;
    auto id = st.insert_container(rec);
    st.add_gpu(id, {"GPU-a", 0});
    st.add_gpu(id, {"GPU-b", 1});
    meter_tick(st, t0 + 5400);  // 1.5 h with 2 GPUs, across an hour boundary
    // Whole seconds summed as doubles: exact; 1e-6 only absorbs the SQL float round trip.
    EXPECT_NEAR(gpu_seconds_since(st, "alice", t0 - 1), 2 * 5400, 1e-6);
    EXPECT_EQ(gpu_seconds_since(st, "bob", t0 - 1), 0);
    auto rows = st.db().query("SELECT COUNT(*) FROM gpu_usage WHERE user='alice'");
    EXPECT_EQ(rows[0].i64(0), 2);  // two hour buckets
    meter_tick(st, t0 + 100);      // a clock that went back charges nothing
    EXPECT_NEAR(gpu_seconds_since(st, "alice", t0 - 1), 2 * 5400, 1e-6);
    std::string m = usage_metrics(st, std::string("alice"));
    EXPECT_NE(m.find("gpulab_gpu_seconds_total{user=\"alice\"} 10800"), std::string::npos) << m;
    EXPECT_NE(m.find("gpulab_container_gpu_seconds_total{user=\"alice\",container=\"c1\"} 10800"),
              std::string::npos);
    EXPECT_EQ(usage_metrics(st, std::string("bob")).find("alice"), std::string::npos);
  }
  auto store = Store::open((dir / "m.db").string());
  ASSERT_TRUE(store.ok());
  meter_tick(**store, t0 + 5400 + 600);
  EXPECT_NEAR(gpu_seconds_since(**store, "alice", t0 - 1), 2 * 6000, 1e-6);
  std::filesystem::remove_all(dir);
}

TEST_F(IdleReclaim, StopsEveryIdleContainerWithinOneCheckAndNoOther) {
  ASSERT_TRUE(ensure_service_images(*client_, false).ok());
  ServiceConfig cfg = in_process_config();
  cfg.port_rest_seconds = 1;
  for (int i = 0; i < 6; ++i)
    cfg.gpus.push_back(
        GpuSlot{"GPU-fake-" + std::to_string(i), i, "nvidia", "", 0, {}, "", "", ""});
  auto s = open_service(cfg);
  auto clock = std::make_shared<ManualClock>(2e9);
  s->clock = clock;

  // Default for everyone: on, below 5 %, idle 10 min, then 5 min after the warning; traffic
  // below 1 MiB per check is none. bob's GPUs go back; carol's policy is off.
  auto policy = [&](Json j) {
    set_idle_policy(*s->store, parse_request(j.dump(), idle_policy_schema()));
  };
  policy({{"user", "*"},
          {"enabled", true},
          {"utilization_percent", 5},
          {"idle_minutes", 10},
          {"warn_minutes", 5},
          {"network_bytes", 1 << 20}});
  policy({{"user", "bob"}, {"release_gpus", true}});
  policy({{"user", "carol"}, {"enabled", false}});

  auto make = [&](const std::string& n, const std::string& owner) {
    CreateOptions o;
    o.name = prefix_ + "-" + n;
    o.owner = owner;
    o.spec.image = kBoxImage;
    o.spec.gpu_count = 1;
    return create_container(*s, o).record;
  };
  auto idle_a = make("idle", "alice");
  auto busy_a = make("busy", "alice");
  auto ssh_a = make("ssh", "alice");
  auto net_a = make("net", "alice");
  auto idle_b = make("bobidle", "bob");
  auto off_c = make("caroloff", "carol");
  // An established connection to port 22 inside ssh_a (busybox nc on both ends).
  auto ex = client_->exec(ssh_a.name,
                          {"sh", "-c",
                           "(sleep 3600 2>/dev/null | nc -l -p 22 >/dev/null 2>&1 &); sleep 0.5; "
                           "(sleep 3600 2>/dev/null | nc 127.0.0.1 22 >/dev/null 2>&1 &); "
                           "sleep 0.5"});
  ASSERT_TRUE(ex.ok());
  auto tcp = client_->exec(ssh_a.name, {"cat", "/proc/net/tcp", "/proc/net/tcp6"});
  ASSERT_TRUE(tcp.ok());
  ASSERT_EQ(ssh_sessions_in(tcp->out), 1) << "the test's SSH stand-in did not connect:\n"
                                          << tcp->out;
  // net_a's traffic before each check: busy_a (busy anyway) fetches 2 MiB from a busybox httpd
  // in net_a, twice the 1 MiB a check calls traffic. TCP, so nothing is lost or waited out (40
  // fragmented pings to the gateway now and then waited out a lost reply, seconds a check).
  auto serve = client_->exec(net_a.name, {"sh", "-c",
                                          "mkdir -p /tmp/www && dd if=/dev/zero of=/tmp/www/f "
                                          "bs=1024 count=2048 2>/dev/null && httpd -p 8080 -h "
                                          "/tmp/www && hostname -i"});
  ASSERT_TRUE(serve.ok() && serve->exit_code == 0) << (serve.ok() ? serve->err : "exec failed");
  const std::string url = "http://" + trim(serve->out) + ":8080/f";
  auto net_bytes = [&] {
    auto dev = client_->exec(net_a.name, {"cat", "/proc/net/dev"});
    return dev.ok() ? net_bytes_in(dev->out).value_or(-1) : -1;
  };
  auto traffic = [&] {
    auto get = client_->exec(busy_a.name, {"wget", "-q", "-O", "/dev/null", url});
    ASSERT_TRUE(get.ok() && get->exit_code == 0) << url << (get.ok() ? "\n" + get->err : "");
  };
  // Measured once, so a stand-in that fails is told apart from a checker that misses traffic.
  const std::int64_t before = net_bytes();
  traffic();
  ASSERT_GE(net_bytes() - before, 2 << 20) << "the test's traffic stand-in sent too little";

  // Utilization: the busy container's GPU at 80 %, every other at 1 % (below the threshold).
  std::vector<GpuSample> samples;
  for (const auto& g : s->inventory().gpus) {
    GpuSample smp;
    smp.uuid = g.uuid;
    smp.utilization_percent = g.uuid == busy_a.gpus[0].uuid ? 80.0 : 1.0;
    samples.push_back(smp);
  }
  auto running = [&](const ContainerRecord& c) {
    auto info = client_->inspect_container(c.name);
    return info.ok() && info->running;
  };
  IdleReclaimer reclaimer(*s);
  const double interval = 300, t0 = clock->now();
  const double deadline = t0 + (10 + 5) * 60;  // idle since the first check, warned, then stopped
  int warned_at = -1, stopped_at = -1;
  for (int k = 0; k <= 5; ++k) {
    clock->set(t0 + k * interval);
    traffic();
    auto r = reclaimer.check(samples);
    std::printf("idle check %d at +%.0fs: checked %d, idle %d, warned %d, stopped %d\n", k,
                k * interval, r.checked, r.idle, r.warned, r.stopped);
    EXPECT_EQ(r.checked, k <= 3 ? 5 : 3);  // carol's is never looked at; stopped ones drop out
    if (r.warned) {
      EXPECT_EQ(r.warned, 2);
      warned_at = k;
      auto motd = client_->exec(idle_a.name, {"cat", "/etc/motd"});
      ASSERT_TRUE(motd.ok());
      EXPECT_NE(motd->out.find("gpulab: this container has been idle for 10 min"),
                std::string::npos)
          << motd->out;
    }
    if (r.stopped) {
      EXPECT_EQ(r.stopped, 2);
      stopped_at = k;
    }
    bool past = clock->now() >= deadline;
    EXPECT_EQ(running(idle_a), !past) << "check " << k;
    EXPECT_EQ(running(idle_b), !past) << "check " << k;
    EXPECT_TRUE(running(busy_a));
    EXPECT_TRUE(running(ssh_a));
    EXPECT_TRUE(running(net_a)) << "check " << k;
    EXPECT_TRUE(running(off_c));
  }
  EXPECT_EQ(warned_at, 2);   // at +600 s, the first check 10 min after idle began
  EXPECT_EQ(stopped_at, 3);  // at +900 s: the first check past the deadline
  EXPECT_LT(t0 + stopped_at * interval - deadline, interval);

  // Stopped, not deleted. alice's keeps its GPU; bob's gave it back (and says how to get it).
  auto a = s->store->find_container(idle_a.id);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->state, state::kExited);
  EXPECT_EQ(a->gpus.size(), 1u);
  auto b = s->store->find_container(idle_b.id);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->state, state::kExited);
  EXPECT_TRUE(b->gpus.empty());
  EXPECT_TRUE(client_->inspect_container(idle_b.name).ok());
  std::string audit = s->store->audit_tail(50).dump();
  EXPECT_NE(audit.find("idle-warning"), std::string::npos);
  EXPECT_NE(audit.find("gpu_count=1"), std::string::npos) << audit;
}

}  // namespace
}  // namespace gpulab::service::testing
