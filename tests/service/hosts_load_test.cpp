// How far one service goes at three hosts (issue 28 item 7): the soak's HTTP client, several
// threads, against `gpulab serve` over the three lab dockerds. Prints requests/s and p50/p95 per
// route (list, status, gpus, create, stop, start, delete), where a create's time goes (the
// service's gpulab_create_phase_seconds: checks, placement + booking, engine, book), the book's
// write rate (the same Store the service uses, in this process) and the cost of one engine
// listing over mutual TLS (what the host monitor and the reconciler pay per host and pass).
// GPULAB_LOAD_SECONDS sets the length of each read phase; the figures are in docs/engines.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "core/strings.h"
#include "lab_service_test.h"
#include "service/store/store.h"

namespace gpulab::service::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Latencies by route, from many threads.
class Samples {
 public:
  void add(const std::string& route, double s, bool good) {
    std::lock_guard<std::mutex> g(mu_);
    by_route_[route].push_back(s);
    if (!good) ++bad_[route];
  }
  // route, requests, requests/s over `wall`, p50 and p95 in ms, failures.
  void print(const std::string& route, double wall) {
    std::lock_guard<std::mutex> g(mu_);
    auto& v = by_route_[route];
    std::sort(v.begin(), v.end());
    auto at = [&](double q) {
      return v.empty() ? 0.0 : 1e3 * v[static_cast<size_t>(q * (v.size() - 1))];
    };
    std::printf("load3: %-8s %6zu requests %8.1f /s  p50 %8.1f ms  p95 %8.1f ms  failed %ld\n",
                route.c_str(), v.size(), wall > 0 ? v.size() / wall : 0.0, at(0.5), at(0.95),
                bad_[route]);
  }
  long failures() {
    std::lock_guard<std::mutex> g(mu_);
    long n = 0;
    for (const auto& [r, k] : bad_) n += k;
    return n;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::vector<double>> by_route_;
  std::map<std::string, long> bad_;
};

class HostsLoad : public LabServiceTest {
 protected:
  // `threads` clients each GET `path` for `seconds`; returns the wall time.
  double hammer(const std::string& token, const std::string& route, int threads, double seconds,
                Samples& out) {
    std::vector<std::thread> ts;
    auto t0 = Clock::now();
    for (int i = 0; i < threads; ++i)
      ts.emplace_back([&] {
        HttpClient c(svc_->url(), token);
        while (secs_since(t0) < seconds) {
          auto t = Clock::now();
          auto r = c.get(kApi + "/" + route);
          out.add(route, secs_since(t), ok(r));
        }
      });
    for (auto& t : ts) t.join();
    return secs_since(t0);
  }

  // Each thread: create (1 GPU every other cycle) -> stop -> start -> delete, `cycles` times.
  double lifecycle(const std::vector<std::string>& tokens, int cycles, Samples& out) {
    std::vector<std::thread> ts;
    auto t0 = Clock::now();
    for (size_t i = 0; i < tokens.size(); ++i)
      ts.emplace_back([&, i] {
        HttpClient c(svc_->url(), tokens[i]);
        for (int k = 0; k < cycles; ++k) {
          std::string name = prefix_ + "-l" + std::to_string(i) + "-" + std::to_string(k);
          Json body = {{"name", name}, {"image", kBoxImage}, {"gpu_count", k % 2}};
          for (const std::string route : {"create", "stop", "start", "delete"}) {
            auto t = Clock::now();
            auto r =
                c.post_json(kApi + "/" + route, route == "create" ? body : Json{{"name", name}});
            out.add(route, secs_since(t), ok(r));
          }
        }
      });
    for (auto& t : ts) t.join();
    return secs_since(t0);
  }
};

TEST_F(HostsLoad, RequestsPerSecondAndPlacementAtThreeHosts) {
  const double seconds = static_cast<double>(soak_env("GPULAB_LOAD_SECONDS", 2));
  const int threads = static_cast<int>(soak_env("GPULAB_LOAD_THREADS", 4));
  Json cfg = lab_config();
  cfg["allocation_policy"] = "spread";
  start_service(cfg);
  if (HasFatalFailure()) return;
  std::string admin = svc_->add_user("load-admin", true);
  HttpClient a(svc_->url(), admin);
  ASSERT_TRUE(
      ok(a.post_json(kApi + "/quotas", {{"user", "*"}, {"max_gpus", 8}, {"max_containers", 50}})));
  std::vector<std::string> tokens;
  for (int i = 0; i < threads; ++i)
    tokens.push_back(svc_->add_user("load" + std::to_string(i), false));
  // Containers for the reads to show: 9 over the three hosts, made 3 at a time.
  std::vector<std::thread> makers;
  std::atomic<int> made{0};
  for (int t = 0; t < 3; ++t)
    makers.emplace_back([&, t] {
      HttpClient c(svc_->url(), admin);
      for (int i = 0; i < 3; ++i)
        made +=
            ok(c.post_json(kApi + "/create", {{"name", prefix_ + "-r" + std::to_string(3 * t + i)},
                                              {"image", kBoxImage}}))
                ? 1
                : 0;
    });
  for (auto& m : makers) m.join();
  ASSERT_EQ(made.load(), 9);
  Samples s;
  std::printf("load3: %d client threads, %.0f s per read route, 9 containers + the cycles'\n",
              threads, seconds);
  for (const std::string route : {"list", "status", "gpus"})
    s.print(route, hammer(admin, route, threads, seconds, s));
  double wall = lifecycle(tokens, static_cast<int>(soak_env("GPULAB_LOAD_CYCLES", 1)), s);
  for (const std::string route : {"create", "stop", "start", "delete"}) s.print(route, wall);
  for (const auto& [phase, e] : create_phases(a.get("/metrics").body))
    std::printf("load3: create phase %-7s %4.0f creates, mean %8.1f ms\n", phase.c_str(), e.count,
                e.count > 0 ? 1e3 * e.seconds / e.count : 0.0);
  EXPECT_EQ(s.failures(), 0);
  auto found = soak_violations(soak_hosts(), *svc_, prefix_, {8, 50});
  for (const auto& v : found) ADD_FAILURE() << v;
}

// What one create and one delete write to the book, `n` times, in the Store the service uses
// (WAL, one BEGIN IMMEDIATE transaction each): the ceiling of placement decisions per second.
void book_write_rate(const std::filesystem::path& file, int n) {
  auto store = Store::open(file.string());
  ASSERT_TRUE(store.ok()) << store.error().message;
  Store& st = **store;
  std::vector<std::int64_t> ids;
  auto t0 = Clock::now();
  for (int i = 0; i < n; ++i)
    st.transaction([&] {
      ContainerRecord rec;
      rec.name = "bench" + std::to_string(i);
      rec.owner = "u" + std::to_string(i % 10);
      rec.state = "creating";
      rec.host = "lab" + std::to_string(1 + i % 3);
      rec.spec.image = kBoxImage;
      rec.ssh_port = 20000 + i;
      auto id = st.insert_container(rec);
      st.add_gpu(id, {"GPU-bench-" + std::to_string(i), i});
      st.add_port(id, 20000 + i, "ssh", 22);
      ids.push_back(id);
    });
  double create_s = secs_since(t0);
  t0 = Clock::now();
  for (auto id : ids) st.transaction([&] { st.set_state(id, "running"); });
  double finish_s = secs_since(t0);
  t0 = Clock::now();
  auto rows = st.containers();
  double read_s = secs_since(t0);
  t0 = Clock::now();
  for (auto id : ids) st.remove_container(id, true);
  double delete_s = secs_since(t0);
  EXPECT_EQ(static_cast<int>(rows.size()), n);
  std::printf(
      "load3: book: %d creates (row + GPU + port, one transaction) %.0f /s, %d state "
      "updates %.0f /s, %d deletes %.0f /s, all %d rows read in %.1f ms\n",
      n, n / create_s, n, n / finish_s, n, n / delete_s, n, 1e3 * read_s);
}

// One engine over mutual TLS as the service reaches it: mean ms of a ping (the host monitor's
// probe) and of a listing of the managed containers (the reconciler's pass), `n` times each.
void engine_costs(const LabHostEngines& lab, int i, int n) {
  auto ep = docker::Endpoint::parse(lab.engines[i].tcp);
  ASSERT_TRUE(ep.ok());
  ep->tls = true;
  ep->ca_file = (lab.tls / "ca.pem").string();
  ep->cert_file = (lab.tls / "cert.pem").string();
  ep->key_file = (lab.tls / "key.pem").string();
  auto c = docker::Client::connect(*ep);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  docker::ListOptions lo;
  lo.all = true;
  lo.labels = {"gpulab.managed=true"};
  size_t listed = 0;
  auto t0 = Clock::now();
  for (int k = 0; k < n; ++k) ASSERT_TRUE(c->ping().ok());
  double ping_s = secs_since(t0);
  t0 = Clock::now();
  for (int k = 0; k < n; ++k) {
    auto l = c->list_containers(lo);
    ASSERT_TRUE(l.ok());
    listed = l->size();
  }
  double list_s = secs_since(t0);
  std::printf("load3: engine %s over TLS: ping %.1f ms, list of %zu managed containers %.1f ms\n",
              lab.engines[i].name.c_str(), 1e3 * ping_s / n, listed, 1e3 * list_s / n);
}

TEST_F(HostsLoad, BookWriteRateAndEngineCostPerHost) {
  book_write_rate(dir_ / "bench.db", static_cast<int>(soak_env("GPULAB_LOAD_BOOK_TX", 300)));
  engine_costs(lab_, 1, 20);
  // The same engine with 40 more managed containers (created, not started: a listing costs per
  // container whatever its state), so the per-container part shows.
  for (int k = 0; k < 40; ++k) {
    docker::CreateSpec spec;
    spec.name = prefix_ + "-idle" + std::to_string(k);
    spec.image = kBoxImage;
    spec.labels = {{"gpulab.managed", "true"}};
    ASSERT_TRUE(lab_.engines[1].client->create_container(spec).ok());
  }
  engine_costs(lab_, 1, 20);
}

}  // namespace
}  // namespace gpulab::service::testing
