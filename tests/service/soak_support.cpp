// The soaks' shared walker and invariant checks (soak_support.h).
#include "soak_support.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/strings.h"
#include "service/ops/images/internal_images.h"
#include "service/store/db.h"
#include "service_env.h"

namespace gpulab::service::testing {

long soak_env(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

namespace {
std::mutex& log_mu() {
  static std::mutex m;
  return m;
}
}  // namespace

SoakWalker::SoakWalker(int user, std::string token, std::string prefix, unsigned seed,
                       std::string image)
    : user_(user),
      token_(std::move(token)),
      prefix_(std::move(prefix)),
      image_(std::move(image)),
      rng_(seed) {}

void SoakWalker::round(const std::string& url, SoakCounts& n, long target,
                       const std::atomic<bool>& stop, const std::function<void(long)>& after_op) {
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

void SoakWalker::forget(const std::string& name) {
  mine_.erase(std::remove(mine_.begin(), mine_.end(), name), mine_.end());
}

HttpResult SoakWalker::one(HttpClient& c) {
  int roll = pick(100);
  Json limits = {{"cpus", "0.1"}, {"memory", "32m"}, {"gpu_count", pick(3)}};
  if (roll < 22 || mine_.empty()) {
    Json j = {{"name", fresh("c")}, {"image", image_}};
    j.update(limits);
    auto r = c.post_json(kApi + "/create", j);
    if (ok(r)) mine_.push_back(j["name"]);
    return r;
  }
  return roll < 85 ? on_existing(c, roll, limits) : restore_one(c, roll, limits);
}

// start / stop / restart / delete / update-resources / snapshot of one of the user's containers.
HttpResult SoakWalker::on_existing(HttpClient& c, int roll, const Json& limits) {
  (void)limits;
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
  } else {
    std::string snap = fresh("s");
    r = c.post_json(kApi + "/snapshot", {{"name", name}, {"snapshot_name", snap}});
    if (ok(r)) snaps_.push_back(snap);
  }
  if (r.status != 0 && code(r) == "CONTAINER_NOT_FOUND") forget(name);  // no answer: no body
  return r;
}

// restore-snapshot / backup / restore (or a restart when there is nothing to restore).
HttpResult SoakWalker::restore_one(HttpClient& c, int roll, const Json& limits) {
  std::string name = any_mine();
  HttpResult r;
  if (roll < 90 && !snaps_.empty()) {
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
  if (r.status != 0 && code(r) == "CONTAINER_NOT_FOUND") forget(name);
  return r;
}

void wait_backups(const std::string& url, const std::string& admin_token) {
  HttpClient c(url, admin_token);
  for (int i = 0; i < 240; ++i) {
    auto r = c.get(kApi + "/backups");
    if (!ok(r) || r.body.find("\"running\"") == std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

namespace {

struct BookRow {
  std::int64_t id;
  std::string owner, state, host;
  int ssh_port;
  int gpu_count;  // what the spec asks
  std::set<std::string> gpus;
};

struct Book {
  std::map<std::string, BookRow> rows;   // by name
  std::map<std::int64_t, int> ssh_rows;  // container id -> its booked SSH port
  std::set<std::string> owned_images;    // images a row, snapshot or running backup owns
};

Book read_book(Db& db, std::vector<std::string>& v) {
  Book b;
  std::map<std::int64_t, std::string> by_id;
  for (const auto& r : db.query("SELECT id,name,owner,state,ssh_port,host,spec FROM containers")) {
    Json spec = Json::parse(r.str(6));
    b.rows[r.str(1)] = BookRow{r.i64(0),
                               r.str(2),
                               r.str(3),
                               r.str(5),
                               static_cast<int>(r.i64(4)),
                               spec.value("gpu_count", 0),
                               {}};
    by_id[r.i64(0)] = r.str(1);
    b.owned_images.insert(spec.value("image", std::string()));
  }
  for (const auto& r : db.query("SELECT gpu_uuid,container_id FROM gpu_allocations")) {
    if (!by_id.count(r.i64(1))) {
      v.push_back("GPU " + r.str(0) + " held by a missing row");
      continue;
    }
    b.rows[by_id[r.i64(1)]].gpus.insert(r.str(0));
  }
  for (const auto& r : db.query("SELECT port,kind,container_id FROM port_allocations")) {
    if (!by_id.count(r.i64(2))) v.push_back("orphan port " + r.str(0));
    if (r.str(1) == "ssh") b.ssh_rows[r.i64(2)] = static_cast<int>(r.i64(0));
  }
  for (const auto& r : db.query("SELECT image FROM snapshots")) b.owned_images.insert(r.str(0));
  for (const auto& r : db.query("SELECT name FROM backups WHERE state='running'"))
    b.owned_images.insert("gpulab-backup:" + r.str(0));
  return b;
}

// One up host: its engine's containers of this run against the book's rows for that host.
void engine_violations(const SoakHost& h, const Book& book, const std::string& prefix,
                       std::map<std::string, std::string>& gpu_on_engine,
                       std::set<std::string>& seen, std::vector<std::string>& v) {
  docker::ListOptions lo;
  lo.all = true;
  lo.labels = {"gpulab.managed=true"};
  auto list = h.engine->list_containers(lo);
  if (!list) {
    v.push_back(h.name + ": engine list: " + list.error().message);
    return;
  }
  std::map<std::string, std::string> ssh_on_engine;  // port -> container, on this host
  for (const auto& e : *list) {
    if (e.name.rfind(prefix, 0) != 0) continue;
    std::string where = e.name + " on " + h.name;
    auto it = book.rows.find(e.name);
    if (it == book.rows.end() || it->second.host != h.name) {
      v.push_back("orphan container: " + where + " (" + e.state + ")" +
                  (it == book.rows.end() ? "" : ", booked on " + it->second.host));
      continue;
    }
    seen.insert(e.name);
    const BookRow& row = it->second;
    if ((row.state == "running") != (e.state == "running"))
      v.push_back("state of " + where + ": book " + row.state + ", engine " + e.state);
    std::set<std::string> labeled;
    if (e.labels.count("gpulab.gpus"))
      for (const auto& u : split(e.labels.at("gpulab.gpus"), ',')) labeled.insert(u);
    if (labeled != row.gpus) v.push_back("GPUs of " + where + ": book and engine differ");
    for (const auto& u : labeled)
      if (!gpu_on_engine.emplace(u, e.name).second)
        v.push_back("GPU " + u + " held twice: " + gpu_on_engine[u] + " and " + e.name);
    std::string port = e.labels.count("gpulab.ssh_port") ? e.labels.at("gpulab.ssh_port") : "";
    if (!ssh_on_engine.emplace(port, e.name).second)
      v.push_back("SSH port " + port + " held twice on " + h.name + ": " + ssh_on_engine[port] +
                  " and " + e.name);
    auto booked = book.ssh_rows.find(row.id);
    if (port != std::to_string(row.ssh_port) || booked == book.ssh_rows.end() ||
        booked->second != row.ssh_port)
      v.push_back("SSH port of " + where + ": book and engine differ");
  }
}

// Rows without their engine container (on up hosts), intents and leases left, a down host's rows
// that lost GPUs, quotas.
void book_violations(const Book& book, const std::map<std::string, bool>& up,
                     const std::set<std::string>& seen, const std::string& prefix, SoakQuota q,
                     std::vector<std::string>& v) {
  std::map<std::string, int> gpus_of, containers_of;
  for (const auto& [name, row] : book.rows) {
    auto host = up.find(row.host);
    if (host == up.end()) v.push_back(name + " booked on an unknown host '" + row.host + "'");
    bool host_up = host != up.end() && host->second;
    bool intent = row.state == "creating" || row.state == "deleting" || row.state == "recreating";
    // The reconciler leaves a down host's rows alone: an intent there waits for its return.
    if (intent && host_up) v.push_back("intent left behind: " + name + " " + row.state);
    if (row.state == "leased") v.push_back("orphan lease: " + name);
    if (host_up && name.rfind(prefix, 0) == 0 && !seen.count(name))
      v.push_back("book row without an engine container: " + name + " on " + row.host + " (" +
                  row.state + ")");
    if (!host_up && !intent && static_cast<int>(row.gpus.size()) != row.gpu_count)
      v.push_back(name + " on down host " + row.host + " lost its GPUs");
    gpus_of[row.owner] += static_cast<int>(row.gpus.size());
    ++containers_of[row.owner];
  }
  for (const auto& [user, n] : gpus_of)
    if (n > q.max_gpus)
      v.push_back("quota exceeded: " + user + " holds " + std::to_string(n) + " GPUs");
  for (const auto& [user, n] : containers_of)
    if (n > q.max_containers)
      v.push_back("quota exceeded: " + user + " has " + std::to_string(n) + " containers");
}

// A snapshot, backup or recreate image of this run that nothing owns, on one up host.
void image_violations(const SoakHost& h, const Book& book, const std::string& prefix,
                      std::vector<std::string>& v) {
  auto images = h.engine->list_images();
  if (!images) {
    v.push_back(h.name + ": engine image list: " + images.error().message);
    return;
  }
  for (const auto& img : *images)
    for (const auto& tag : img.repo_tags)
      for (const char* repo : kInternalImageRepos)
        if (starts_with(tag, std::string(repo) + prefix) && !book.owned_images.count(tag))
          v.push_back("orphan image on " + h.name + ": " + tag);
}

}  // namespace

std::vector<std::string> soak_violations(const std::vector<SoakHost>& hosts,
                                         const ServiceProcess& svc, const std::string& prefix,
                                         SoakQuota quota) {
  std::vector<std::string> v;
  auto db = Db::open(svc.db_path().string());
  if (!db) return {"cannot open the book: " + db.error().message};
  Book book = read_book(**db, v);
  std::map<std::string, std::string> gpu_on_engine;  // uuid -> container, over all hosts
  std::set<std::string> seen;
  std::map<std::string, bool> up;
  for (const auto& h : hosts) {
    up[h.name] = h.engine != nullptr;
    if (!h.engine) continue;
    engine_violations(h, book, prefix, gpu_on_engine, seen, v);
    image_violations(h, book, prefix, v);
  }
  book_violations(book, up, seen, prefix, quota, v);
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(svc.backup_dir(), ec)) {
    std::string n = f.path().filename().string();
    if ((n.size() > 8 && n.substr(n.size() - 8) == ".partial") || starts_with(n, ".upload-"))
      v.push_back("temporary file left: " + n);
  }
  return v;
}

void soak_check(const char* when, const std::function<std::vector<std::string>()>& find,
                std::chrono::seconds settle, SoakTally& t) {
  ++t.checks;
  auto found = find();
  if (!found.empty()) {
    std::this_thread::sleep_for(settle);
    auto again = find();
    t.settled += std::max(0L, static_cast<long>(found.size()) - static_cast<long>(again.size()));
    found = again;
  }
  for (const auto& msg : found) {
    ++t.violations;
    std::printf("soak: VIOLATION (%s): %s\n", when, msg.c_str());
  }
}

}  // namespace gpulab::service::testing
