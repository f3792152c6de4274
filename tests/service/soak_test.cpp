// Soak under faults: 10 users drive a random mix of create / start / stop / restart / delete /
// update-resources / snapshot / restore-snapshot / backup / restore against the real service and
// dockerd while the service is SIGKILLed at random points and restarted. After every restart and
// at the end the invariants are checked: no GPU or SSH port held twice, the book equals the
// engine's containers (names and running state), no orphan container, lease, port, image or
// temporary file, no quota exceeded. `make test` runs a short version; `make soak` the long one
// (GPULAB_SOAK_OPS, GPULAB_SOAK_KILLS, GPULAB_SOAK_USERS set the size).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "core/strings.h"
#include "service/store/db.h"
#include "service_env.h"

namespace gpulab::service::testing {
namespace {

class Soak : public ServiceTest {};

const std::string kApi = "/api/v1/gpu-docker";
constexpr int kMaxGpus = 2;  // the default quota every soak user runs under
constexpr int kMaxContainers = 3;

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

struct Counts {
  std::atomic<long> ops{0}, ok{0}, refused{0}, cut{0}, internal{0};
};

// One user's random walk for a round; stops at `target` operations or when `stop` is set.
class Walker {
 public:
  Walker(int user, std::string token, std::string prefix, unsigned seed)
      : user_(user), token_(std::move(token)), prefix_(std::move(prefix)), rng_(seed) {}

  void round(const std::string& url, Counts& n, long target, const std::atomic<bool>& stop,
             const std::function<void(long)>& after_op) {
    HttpClient c(url, token_);
    mine_.clear();
    auto list = c.get(kApi + "/list");
    if (ok(list)) {
      Json answer = list.json();  // named: ranging over a temporary's member would dangle
      for (const auto& x : answer["data"]["containers"]) mine_.push_back(x["name"]);
    }
    while (!stop) {
      long k = ++n.ops;
      if (k > target) {
        --n.ops;
        return;
      }
      HttpResult r = one(c);
      if (r.status == 0) {
        ++n.cut;  // the service died under it
      } else if (ok(r)) {
        ++n.ok;
      } else if (r.status >= 500 && code(r) == "INTERNAL_ERROR") {
        ++n.internal;
        std::lock_guard<std::mutex> g(log_mu());
        std::printf("soak: user %d: %s\n", user_, r.body.substr(0, 300).c_str());
      } else {
        ++n.refused;
      }
      after_op(k);
    }
  }

 private:
  static std::mutex& log_mu() {
    static std::mutex m;
    return m;
  }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string any_mine() { return mine_.empty() ? prefix_ + "-none" : mine_[pick(mine_.size())]; }
  std::string fresh(const char* kind) {
    return prefix_ + "-u" + std::to_string(user_) + kind + std::to_string(serial_++);
  }
  void forget(const std::string& name) {
    mine_.erase(std::remove(mine_.begin(), mine_.end(), name), mine_.end());
  }

  HttpResult one(HttpClient& c) {
    int roll = pick(100);
    Json limits = {{"cpus", "0.1"}, {"memory", "32m"}, {"gpu_count", pick(3)}};
    if (roll < 22 || mine_.empty()) {
      Json j = {{"name", fresh("c")}, {"image", kBoxImage}};
      j.update(limits);
      auto r = c.post_json(kApi + "/create", j);
      if (ok(r)) mine_.push_back(j["name"]);
      return r;
    }
    std::string name = any_mine();
    HttpResult r;
    if (roll < 32) {
      r = c.post_json(kApi + "/start", {{"name", name}});
    } else if (roll < 44) {
      r = c.post_json(kApi + "/stop", {{"name", name}});
    } else if (roll < 52) {
      r = c.post_json(kApi + "/restart", {{"name", name}});
    } else if (roll < 66) {
      r = c.post_json(kApi + "/delete", {{"name", name}});
      if (ok(r)) forget(name);
    } else if (roll < 78) {
      Json j = {{"name", name}};
      if (pick(2)) {
        j["gpu_count"] = pick(3);  // commit -> recreate
      } else {
        j["cpus"] = pick(2) ? "0.1" : "0.2";
      }
      r = c.post_json(kApi + "/update-resources", j);
    } else if (roll < 85) {
      std::string snap = fresh("s");
      r = c.post_json(kApi + "/snapshot", {{"name", name}, {"snapshot_name", snap}});
      if (ok(r)) snaps_.push_back(snap);
    } else if (roll < 90 && !snaps_.empty()) {
      Json j = {{"snapshot_name", snaps_.back()}, {"name", fresh("c")}};
      j.update(limits);
      r = c.post_json(kApi + "/restore-snapshot", j);
      if (ok(r)) mine_.push_back(j["name"]);
      if (snaps_.size() > 1) {
        c.post_json(kApi + "/delete-snapshot", {{"snapshot_name", snaps_.front()}});
        snaps_.erase(snaps_.begin());
      }
    } else if (roll < 95) {
      std::string bk = fresh("b");
      r = c.post_json(kApi + "/backup", {{"name", name}, {"backup_name", bk}});
      if (ok(r)) backups_.push_back(bk);
    } else if (!backups_.empty()) {
      Json j = {{"backup_path", backups_.back() + ".tar"}, {"name", fresh("c")}};
      j.update(limits);
      r = c.post_json(kApi + "/restore", j);
      if (ok(r)) mine_.push_back(j["name"]);
      if (backups_.size() > 1) {
        c.post_json(kApi + "/backups/delete", {{"backup_name", backups_.front()}});
        backups_.erase(backups_.begin());
      }
    } else {
      r = c.post_json(kApi + "/restart", {{"name", name}});
    }
    if (r.status != 0 && code(r) == "CONTAINER_NOT_FOUND") forget(name);  // no answer: no body
    return r;
  }

  int user_;
  std::string token_, prefix_;
  std::mt19937 rng_;
  int serial_ = 0;
  std::vector<std::string> mine_, snaps_, backups_;
};

// Waits (up to 120 s) until no backup is still being written, so its .partial is not "left".
void wait_backups(const std::string& url, const std::string& admin_token) {
  HttpClient c(url, admin_token);
  for (int i = 0; i < 240; ++i) {
    auto r = c.get(kApi + "/backups");
    if (!ok(r) || r.body.find("\"running\"") == std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// Every invariant, from the book (SQLite, read beside the service) and the engine.
std::vector<std::string> soak_violations(const docker::Client& engine, const ServiceProcess& svc,
                                         const std::string& prefix) {
  std::vector<std::string> v;
  auto db = Db::open(svc.db_path().string());
  if (!db) return {"cannot open the book: " + db.error().message};
  struct Row {
    std::int64_t id;
    std::string owner, state;
    int ssh_port;
    std::set<std::string> gpus;
  };
  std::map<std::string, Row> book;
  std::map<std::int64_t, std::string> by_id;
  for (const auto& r : (*db)->query("SELECT id,name,owner,state,ssh_port FROM containers")) {
    book[r.str(1)] = Row{r.i64(0), r.str(2), r.str(3), static_cast<int>(r.i64(4)), {}};
    by_id[r.i64(0)] = r.str(1);
  }
  for (const auto& r : (*db)->query("SELECT gpu_uuid,container_id FROM gpu_allocations")) {
    if (!by_id.count(r.i64(1))) {
      v.push_back("GPU " + r.str(0) + " held by a missing row");
      continue;
    }
    book[by_id[r.i64(1)]].gpus.insert(r.str(0));
  }
  std::map<std::int64_t, int> ssh_rows;
  for (const auto& r : (*db)->query("SELECT port,kind,container_id FROM port_allocations")) {
    if (!by_id.count(r.i64(2))) v.push_back("orphan port " + r.str(0));
    if (r.str(1) == "ssh") ssh_rows[r.i64(2)] = static_cast<int>(r.i64(0));
  }
  docker::ListOptions lo;
  lo.all = true;
  lo.labels = {"gpulab.managed=true"};
  auto list = engine.list_containers(lo);
  if (!list) return {"engine list: " + list.error().message};
  std::map<std::string, std::string> gpu_on_engine;  // uuid -> container
  std::map<std::string, std::string> ssh_on_engine;  // port -> container
  std::set<std::string> seen;
  for (const auto& e : *list) {
    if (e.name.rfind(prefix, 0) != 0) continue;
    seen.insert(e.name);
    auto it = book.find(e.name);
    if (it == book.end()) {
      v.push_back("orphan container on the engine: " + e.name + " (" + e.state + ")");
      continue;
    }
    const Row& row = it->second;
    bool book_running = row.state == "running";
    if (book_running != (e.state == "running"))
      v.push_back("state of " + e.name + ": book " + row.state + ", engine " + e.state);
    std::set<std::string> labeled;
    if (e.labels.count("gpulab.gpus"))
      for (const auto& u : split(e.labels.at("gpulab.gpus"), ',')) labeled.insert(u);
    if (labeled != row.gpus) v.push_back("GPUs of " + e.name + ": book and engine differ");
    for (const auto& u : labeled)
      if (!gpu_on_engine.emplace(u, e.name).second)
        v.push_back("GPU " + u + " held twice: " + gpu_on_engine[u] + " and " + e.name);
    std::string port = e.labels.count("gpulab.ssh_port") ? e.labels.at("gpulab.ssh_port") : "";
    if (!ssh_on_engine.emplace(port, e.name).second)
      v.push_back("SSH port " + port + " held twice: " + ssh_on_engine[port] + " and " + e.name);
    if (port != std::to_string(row.ssh_port) || ssh_rows[row.id] != row.ssh_port)
      v.push_back("SSH port of " + e.name + ": book and engine differ");
  }
  std::map<std::string, int> gpus_of, containers_of;
  for (const auto& [name, row] : book) {
    if (row.state == "creating" || row.state == "deleting" || row.state == "recreating")
      v.push_back("intent left behind: " + name + " " + row.state);
    if (row.state == "leased") v.push_back("orphan lease: " + name);
    if (name.rfind(prefix, 0) == 0 && !seen.count(name))
      v.push_back("book row without an engine container: " + name + " (" + row.state + ")");
    gpus_of[row.owner] += static_cast<int>(row.gpus.size());
    ++containers_of[row.owner];
  }
  for (const auto& [user, n] : gpus_of)
    if (n > kMaxGpus)
      v.push_back("quota exceeded: " + user + " holds " + std::to_string(n) + " GPUs");
  for (const auto& [user, n] : containers_of)
    if (n > kMaxContainers)
      v.push_back("quota exceeded: " + user + " has " + std::to_string(n) + " containers");
  // Orphan images: a snapshot, backup or recreate image of this run that nothing owns (its
  // snapshot row, a running backup, or a row that runs it).
  std::set<std::string> owned;
  for (const auto& r : (*db)->query("SELECT spec FROM containers"))
    owned.insert(Json::parse(r.str(0)).value("image", std::string()));
  for (const auto& r : (*db)->query("SELECT image FROM snapshots")) owned.insert(r.str(0));
  for (const auto& r : (*db)->query("SELECT name FROM backups WHERE state='running'"))
    owned.insert("gpulab-backup:" + r.str(0));
  auto images = engine.list_images();
  if (!images) return {"engine image list: " + images.error().message};
  for (const auto& img : *images)
    for (const auto& tag : img.repo_tags)
      for (const char* repo : {"gpulab-snapshot:", "gpulab-backup:", "gpulab-recreate:"})
        if (starts_with(tag, std::string(repo) + prefix) && !owned.count(tag))
          v.push_back("orphan image: " + tag);
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(svc.backup_dir(), ec)) {
    std::string n = f.path().filename().string();
    if ((n.size() > 8 && n.substr(n.size() - 8) == ".partial") || starts_with(n, ".upload-"))
      v.push_back("temporary file left: " + n);
  }
  return v;
}

TEST_F(Soak, RandomOperationsWhileTheServiceIsKilled) {
  const long total = env_long("GPULAB_SOAK_OPS", 150);
  const long kills = env_long("GPULAB_SOAK_KILLS", 3);
  const int users = static_cast<int>(env_long("GPULAB_SOAK_USERS", 10));
  const unsigned seed = static_cast<unsigned>(env_long("GPULAB_SOAK_SEED", std::random_device{}()));
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
    ASSERT_TRUE(ok(
        a.post_json(kApi + "/quotas",
                    {{"user", "*"}, {"max_gpus", kMaxGpus}, {"max_containers", kMaxContainers}})));
  }
  std::vector<std::unique_ptr<Walker>> walkers;
  for (int u = 0; u < users; ++u)
    walkers.push_back(std::make_unique<Walker>(u, svc_->add_user("soak" + std::to_string(u), false),
                                               prefix_, seed + u));
  std::printf("soak: %ld operations, %ld kills, %d users, seed %u\n", total, kills, users, seed);
  Counts n;
  long done_kills = 0, checks = 0, violations = 0;
  std::mt19937 rng(seed);
  long settled = 0;
  auto check = [&](const char* when) {
    wait_backups(svc_->url(), admin);
    ++checks;
    auto found = soak_violations(*client_, *svc_, prefix_);
    if (!found.empty()) {
      // The engine may finish a request the killed service sent after the restart's reconcile
      // ran; the reconciler's periodic pass (every 6 s here) must settle it. What stays counts.
      std::this_thread::sleep_for(std::chrono::seconds(8));
      auto again = soak_violations(*client_, *svc_, prefix_);
      settled += static_cast<long>(found.size()) - static_cast<long>(again.size());
      found = again;
    }
    for (const auto& msg : found) {
      ++violations;
      std::printf("soak: VIOLATION (%s): %s\n", when, msg.c_str());
    }
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
                round, n.ops.load(), done_kills, checks, violations);
  }
  check("at the end");
  std::printf(
      "soak: operations %ld (ok %ld, refused %ld, cut by a kill %ld, internal errors %ld), "
      "kills %ld, invariant checks %ld, violations %ld (settled by the reconciler within its "
      "interval: %ld)\n",
      n.ops.load(), n.ok.load(), n.refused.load(), n.cut.load(), n.internal.load(), done_kills,
      checks, violations, settled);
  EXPECT_EQ(violations, 0);
  EXPECT_EQ(done_kills, kills);
  EXPECT_GT(n.ok.load(), total / 10);  // the mix did real work, not only refusals
}

}  // namespace
}  // namespace gpulab::service::testing
