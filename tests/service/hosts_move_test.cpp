// Moving a stopped container between hosts (POST /move) on three real dockerds over mutual TLS
// (lab_hosts.h): data, name, owner, password and bookings kept; a running container, another
// user's, an unknown host, a target without a free GPU and a name taken there refused with
// nothing left on the target; the target's dockerd and the service SIGKILLed mid-move; a move
// the book had switched before a crash completed at the restart.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "lab_hosts.h"
#include "service/store/store.h"

namespace gpulab::service::testing {
namespace {

using Clock = std::chrono::steady_clock;

class ServiceHostsMove : public LabHostsTest {
 protected:
  // The lab engines are the tests' own: a failed test's move images go with its containers.
  void TearDown() override {
    LabHostsTest::TearDown();
    for (int i = 0; i < static_cast<int>(engines_.size()); ++i)
      for (const auto& tag : move_images(i)) (void)engines_[i].client->remove_image(tag, true);
  }
  // Starts the lab's service with authentication: admin "boss", users "alice" and "bob".
  void start_lab() {
    Json cfg = lab_config();
    cfg["auth_required"] = true;
    start(cfg);
    if (HasFatalFailure()) return;
    admin_ = svc_->add_user("boss", true);
    alice_ = svc_->add_user("alice", false);
    bob_ = svc_->add_user("bob", false);
  }
  // alice's container `name` on `host` with `gpus` GPUs and `mb` MB of random data in /data.bin;
  // stopped unless `running`. Its SSH password and the data's md5 come back.
  void make_container(const std::string& name, const std::string& host, int gpus, int mb,
                      bool running, std::string* password, std::string* md5,
                      const Json& ports = Json::array()) {
    HttpClient c(svc_->url(), alice_);
    Json body = {{"name", name}, {"image", kBoxImage}, {"gpu_count", gpus},
                 {"host", host}, {"cpus", "1"},        {"memory", "512m"}};
    if (!ports.empty()) body["port"] = ports;
    auto r = c.post_json(kApi + "/create", body);
    ASSERT_TRUE(ok(r)) << r.body;
    if (password) *password = r.json()["data"].value("ssh_password", std::string());
    const int i = index_of(host);
    auto w = engines_[i].client->exec(
        name, {"sh", "-c",
               "dd if=/dev/urandom of=/data.bin bs=1048576 count=" + std::to_string(mb) +
                   " 2>/dev/null && md5sum /data.bin"});
    ASSERT_TRUE(w.ok() && w->exit_code == 0) << (w.ok() ? w->err : w.error().to_string());
    if (md5) *md5 = split(trim(w->out), ' ')[0];
    if (!running) {
      ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", name}})));
    }
  }
  int index_of(const std::string& host) const {
    for (size_t i = 0; i < engines_.size(); ++i)
      if (engines_[i].name == host) return static_cast<int>(i);
    return -1;
  }
  // Images of gpulab moves on engine i (tags), as the engine lists them.
  std::vector<std::string> move_images(int i) const {
    std::vector<std::string> tags;
    if (!engines_[i].client->ping()) return tags;
    docker::ImageListOptions lo;
    lo.reference = {"gpulab-move"};
    if (auto l = engines_[i].client->list_images(lo))
      for (const auto& img : *l)
        for (const auto& t : img.repo_tags) tags.push_back(t);
    return tags;
  }
  // Engines holding a container of that name.
  std::vector<int> holders(const std::string& name) {
    std::vector<int> v;
    for (int i = 0; i < 3; ++i)
      if (engines_[i].client->ping() && on_engine(i, name)) v.push_back(i);
    return v;
  }
  Json row(const std::string& name) {
    HttpClient c(svc_->url(), admin_);
    const Json list = c.get(kApi + "/list").json();  // held: the loop reads inside it
    for (const auto& x : list["data"]["containers"])
      if (x["name"] == name) return x;
    return Json();
  }
  // Starts it through the API on whatever host the book says, and reads /data.bin's md5 and the
  // password file there.
  void start_and_read(const std::string& name, std::string* md5, std::string* password) {
    HttpClient c(svc_->url(), alice_);
    auto st = c.post_json(kApi + "/start", {{"name", name}});
    ASSERT_TRUE(ok(st)) << st.body;
    const int i = index_of(row(name)["host"]);
    ASSERT_GE(i, 0);
    auto r = engines_[i].client->exec(name, {"sh", "-c", "md5sum /data.bin"});
    ASSERT_TRUE(r.ok() && r->exit_code == 0) << (r.ok() ? r->err : r.error().to_string());
    *md5 = split(trim(r->out), ' ')[0];
    auto p = engines_[i].client->exec(name, {"cat", docker::kLabSshPasswordFile});
    ASSERT_TRUE(p.ok());
    *password = p->out;
  }
  // Polls until engine i holds a move image (on the source: the commit is done and the stream
  // starts; on the target: the load is done).
  bool wait_for_move_image(int i, std::chrono::seconds limit) {
    auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      if (!move_images(i).empty()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  // Whether the audit log has an entry for `target` with `outcome`.
  bool audited(const std::string& target, const std::string& outcome) {
    const Json audit = HttpClient(svc_->url(), admin_).get(kApi + "/audit?limit=100").json();
    for (const auto& e : audit["data"]["entries"])
      if (e["target"] == target && e["outcome"] == outcome) return true;
    return false;
  }
  std::string admin_, alice_, bob_;
};

TEST_F(ServiceHostsMove, MovesAStoppedContainerWithItsDataNameOwnerAndPassword) {
  start_lab();
  if (HasFatalFailure()) return;
  // GPULAB_MOVE_MB: a bigger container to time a move (64 MB by default).
  const char* size_env = std::getenv("GPULAB_MOVE_MB");
  const int mb = size_env ? static_cast<int>(parse_int(size_env).value_or(64)) : 64;
  const int user_port = unique_port_base() + 7;
  std::string password, md5;
  make_container("mv1", "lab1", 1, mb, true, &password, &md5,
                 Json::array({std::to_string(user_port) + ":80"}));
  if (HasFatalFailure()) return;
  ASSERT_FALSE(password.empty());
  HttpClient alice(svc_->url(), alice_), bob(svc_->url(), bob_);

  auto running = alice.post_json(kApi + "/move", {{"name", "mv1"}, {"host", "lab2"}});
  EXPECT_EQ(running.status, 409) << running.body;
  EXPECT_NE(running.body.find("stop it first"), std::string::npos) << running.body;
  ASSERT_TRUE(ok(alice.post_json(kApi + "/stop", {{"name", "mv1"}})));
  // Another user's container: refused as on every other route (FORBIDDEN), nothing moves.
  auto other = bob.post_json(kApi + "/move", {{"name", "mv1"}, {"host", "lab2"}});
  EXPECT_EQ(code(other), "FORBIDDEN") << other.body;
  auto unknown = alice.post_json(kApi + "/move", {{"name", "mv1"}, {"host", "nope"}});
  EXPECT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_NE(unknown.body.find("'nope'"), std::string::npos) << unknown.body;
  auto same = alice.post_json(kApi + "/move", {{"name", "mv1"}, {"host", "lab1"}});
  EXPECT_EQ(same.status, 409) << same.body;
  auto bad = alice.post_json(kApi + "/move", {{"name", "mv1"}, {"host", "lab2"}, {"x", 1}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  ASSERT_EQ(row("mv1")["host"], "lab1");

  auto t0 = Clock::now();
  auto moved = alice.post_json(kApi + "/move", {{"name", "mv1"}, {"host", "lab2"}});
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_TRUE(ok(moved)) << moved.body << log_lines();
  const Json d = moved.json()["data"];
  const double image_mb = d["image_bytes"].get<double>() / 1e6;
  const double stream_s = d["stream_seconds"].get<double>();
  std::printf(
      "moved a container with %d MB written (image archive %.1f MB) lab1 -> lab2 in %.2f s"
      " (%.1f MB/s; commit %.2f s, stream %.2f s = %.1f MB/s)\n",
      mb, image_mb, s, image_mb / s, d["commit_seconds"].get<double>(), stream_s,
      image_mb / stream_s);
  EXPECT_EQ(d["host"], "lab2");
  EXPECT_EQ(d["moved_from"], "lab1");
  EXPECT_EQ(d["owner"], "alice");

  // The book: on lab2 with a lab2 GPU and its user port there; lab1's GPU free again.
  Json r = row("mv1");
  EXPECT_EQ(r["host"], "lab2");
  ASSERT_EQ(r["gpu_uuids"].size(), 1u);
  EXPECT_EQ(r["gpu_uuids"][0].get<std::string>().rfind("GPU-lab2-", 0), 0u) << r.dump();
  EXPECT_EQ(r["port_mappings"], Json::array({std::to_string(user_port) + ":80"}));
  EXPECT_EQ(r["cpus"], "1");
  EXPECT_EQ(r["memory"], "512m");
  Json status = alice.get(kApi + "/status").json()["data"];
  for (const auto& h : status["hosts"])
    EXPECT_EQ(h["used_gpu_indices"].size(), h["name"] == "lab2" ? 1u : 0u) << h.dump();
  // The engines: gone from lab1 with its commit image, stopped on lab2.
  EXPECT_FALSE(on_engine(0, "mv1"));
  EXPECT_TRUE(move_images(0).empty());
  auto there = engines_[1].client->inspect_container("mv1");
  ASSERT_TRUE(there.ok());
  EXPECT_NE(there->status, "running");
  EXPECT_EQ(move_images(1).size(), 1u);  // the image it runs on
  // Nothing was staged on the service's disk (its TMPDIR is its own).
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::is_empty(svc_->tmp_dir(), ec) || ec) << "files in the tmp dir";

  std::string md5_after, password_after;
  start_and_read("mv1", &md5_after, &password_after);
  if (HasFatalFailure()) return;
  EXPECT_EQ(md5_after, md5);
  EXPECT_EQ(password_after, password);
  auto limits = engines_[1].client->inspect_container("mv1");  // the limits are the engine's
  ASSERT_TRUE(limits.ok());
  EXPECT_EQ(limits->nano_cpus, 1000000000);
  EXPECT_EQ(limits->memory_bytes, 512ll << 20);

  HttpClient admin(svc_->url(), admin_);
  auto audit = admin.get(kApi + "/audit?limit=20").json()["data"]["entries"];
  bool logged = false;
  for (const auto& e : audit)
    if (e["action"] == "move" && e["target"] == "mv1" && e["outcome"] == "ok") logged = true;
  EXPECT_TRUE(logged) << audit.dump();
  EXPECT_TRUE(admin.get("/api/v1/openapi.json").json()["paths"].contains(kApi + "/move"));
  // Deleted, its move image goes too.
  ASSERT_TRUE(ok(alice.post_json(kApi + "/delete", {{"name", "mv1"}})));
  EXPECT_TRUE(move_images(1).empty());
}

TEST_F(ServiceHostsMove, NoFreeGpuOrATakenNameOnTheTargetLeavesNothingThere) {
  start_lab();
  if (HasFatalFailure()) return;
  HttpClient alice(svc_->url(), alice_);
  ASSERT_TRUE(ok(alice.post_json(
      kApi + "/create",
      {{"name", "full"}, {"image", kBoxImage}, {"gpu_count", 2}, {"host", "lab3"}})));
  std::string md5;
  make_container("mv2", "lab1", 1, 1, false, nullptr, &md5);
  if (HasFatalFailure()) return;
  auto before = engines_[2].client->list_images();
  ASSERT_TRUE(before.ok());

  auto no_gpu = alice.post_json(kApi + "/move", {{"name", "mv2"}, {"host", "lab3"}});
  EXPECT_EQ(code(no_gpu), "GPU_ALLOCATION_FAILED") << no_gpu.body;
  EXPECT_NE(no_gpu.body.find("lab3"), std::string::npos) << no_gpu.body;
  EXPECT_FALSE(on_engine(2, "mv2"));
  EXPECT_TRUE(move_images(2).empty());
  auto after = engines_[2].client->list_images();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), before->size());
  EXPECT_TRUE(move_images(0).empty());

  // A container of that name on lab2, made outside the service.
  docker::CreateSpec foreign;
  foreign.name = "mv2";
  foreign.image = kBoxImage;
  ASSERT_TRUE(engines_[1].client->create_container(foreign).ok());
  auto clash = alice.post_json(kApi + "/move", {{"name", "mv2"}, {"host", "lab2"}});
  EXPECT_EQ(code(clash), "NAME_CONFLICT") << clash.body;
  EXPECT_TRUE(move_images(1).empty());
  EXPECT_TRUE(move_images(0).empty());
  (void)engines_[1].client->remove_container("mv2", true);

  // Still whole on lab1: listed there, its GPU booked there, startable with its data.
  Json r = row("mv2");
  EXPECT_EQ(r["host"], "lab1");
  EXPECT_EQ(r["gpu_uuids"][0].get<std::string>().rfind("GPU-lab1-", 0), 0u) << r.dump();
  Json status = alice.get(kApi + "/status").json()["data"];
  for (const auto& h : status["hosts"])
    if (h["name"] == "lab2") {
      EXPECT_TRUE(h["used_gpu_indices"].empty()) << h.dump();
    }
  std::string md5_after, password;
  start_and_read("mv2", &md5_after, &password);
  EXPECT_EQ(md5_after, md5);
}

// SIGKILL lab2's dockerd while the image streams into it: the move fails, the container is whole
// on lab1 (listed, startable, its data there), lab2's GPU is free, and once lab2 is back the
// reconciler removes what the move left there.
TEST_F(ServiceHostsMove, TargetEngineKilledMidMoveLeavesItWholeOnTheSource) {
  start_lab();
  if (HasFatalFailure()) return;
  std::string md5;
  make_container("mvk", "lab1", 1, 400, false, nullptr, &md5);
  if (HasFatalFailure()) return;
  HttpResult moved;
  std::thread mover([&] {
    HttpClient c(svc_->url(), alice_);
    moved = c.post_json(kApi + "/move", {{"name", "mvk"}, {"host", "lab2"}});
  });
  bool streaming = wait_for_move_image(0, std::chrono::seconds(120));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const pid_t pid = engine_pid(1);
  if (streaming && pid > 0) ::kill(pid, SIGKILL);
  mover.join();
  ASSERT_TRUE(streaming) << "the commit image never showed on lab1";
  ASSERT_FALSE(ok(moved)) << "the move ended before the kill: " << moved.body;
  std::printf("move with lab2 killed mid-stream answered %d: %s\n", static_cast<int>(moved.status),
              moved.body.c_str());
  EXPECT_NE(moved.body.find("lab2"), std::string::npos) << moved.body;
  // lab2 down: a move there is a 503 naming it, at once.
  HttpClient alice(svc_->url(), alice_);
  auto down_at = Clock::now();
  while (host_state(alice, "lab2")["state"] != "down" &&
         Clock::now() - down_at < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto to_down = alice.post_json(kApi + "/move", {{"name", "mvk"}, {"host", "lab2"}});
  EXPECT_EQ(to_down.status, 503) << to_down.body;
  EXPECT_NE(to_down.body.find("lab2"), std::string::npos) << to_down.body;

  Json r = row("mvk");
  EXPECT_EQ(r["host"], "lab1") << r.dump();
  EXPECT_NE(r["state"], "moving") << r.dump();
  EXPECT_TRUE(move_images(0).empty());
  Json status = HttpClient(svc_->url(), admin_).get(kApi + "/status").json()["data"];
  for (const auto& h : status["hosts"])
    EXPECT_EQ(h["used_gpu_indices"].size(), h["name"] == "lab1" ? 1u : 0u) << h.dump();
  std::string md5_after, password;
  start_and_read("mvk", &md5_after, &password);
  if (HasFatalFailure()) return;
  EXPECT_EQ(md5_after, md5);

  std::string err;
  ASSERT_TRUE(restart_engines(&err)) << err;
  auto back = Clock::now();
  while ((on_engine(1, "mvk") || !move_images(1).empty()) &&
         Clock::now() - back < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(on_engine(1, "mvk"));
  EXPECT_TRUE(move_images(1).empty()) << join(move_images(1), ", ");
  // The journal row the failed move left for lab2 is settled once lab2 answers.
  bool settled = false;
  while (!settled && Clock::now() - back < std::chrono::seconds(30)) {
    settled = audited("mvk", "cleaned a failed move's target");
    if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  EXPECT_TRUE(settled) << log_lines();
  std::printf("lab2 clean and the move's journal settled %.1f s after lab2's restart\n",
              std::chrono::duration<double>(Clock::now() - back).count());
}

// SIGKILL the service while the image streams: the restart settles the move (rolled back: the
// book never recorded the target's container), leaving exactly one whole container.
TEST_F(ServiceHostsMove, ServiceKilledMidMoveLeavesExactlyOneWholeContainer) {
  start_lab();
  if (HasFatalFailure()) return;
  std::string md5, password;
  make_container("mvs", "lab1", 1, 400, false, &password, &md5);
  if (HasFatalFailure()) return;
  std::thread mover([&] {
    HttpClient c(svc_->url(), alice_);
    (void)c.post_json(kApi + "/move", {{"name", "mvs"}, {"host", "lab2"}});
  });
  bool streaming = wait_for_move_image(0, std::chrono::seconds(120));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  svc_->kill_hard();
  mover.join();
  ASSERT_TRUE(streaming) << "the commit image never showed on lab1";
  ASSERT_TRUE(svc_->start()) << svc_->log_tail();

  auto holders_now = holders("mvs");
  ASSERT_EQ(holders_now.size(), 1u)
      << "containers named mvs on " << holders_now.size() << " engines";
  Json r = row("mvs");
  EXPECT_EQ(r["host"], engines_[holders_now[0]].name) << r.dump();
  EXPECT_NE(r["state"], "moving") << r.dump();
  std::printf("service killed mid-move: the restart left mvs on %s\n",
              r["host"].get<std::string>().c_str());
  if (r["host"] == "lab1") {
    EXPECT_TRUE(audited("mvs", "rolled back unfinished move"));
  }
  for (int i = 0; i < 3; ++i)
    if (i != holders_now[0]) {
      EXPECT_TRUE(move_images(i).empty()) << engines_[i].name;
    }
  std::string md5_after, password_after;
  start_and_read("mvs", &md5_after, &password_after);
  if (HasFatalFailure()) return;
  EXPECT_EQ(md5_after, md5);
  EXPECT_EQ(password_after, password);
}

// SIGKILL the service once the image is loaded on the target (the target's container may be
// made, or even booked): the restart leaves exactly one whole container, and the other host
// holds no move image.
TEST_F(ServiceHostsMove, ServiceKilledAfterTheLoadLeavesOneContainerAndACleanOtherHost) {
  start_lab();
  if (HasFatalFailure()) return;
  std::string md5, password;
  make_container("mvl", "lab1", 0, 100, false, &password, &md5);
  if (HasFatalFailure()) return;
  std::thread mover([&] {
    HttpClient c(svc_->url(), alice_);
    (void)c.post_json(kApi + "/move", {{"name", "mvl"}, {"host", "lab2"}});
  });
  bool loaded = wait_for_move_image(1, std::chrono::seconds(120));  // the image is on lab2
  svc_->kill_hard();
  mover.join();
  ASSERT_TRUE(loaded) << "the image never showed on lab2";
  ASSERT_TRUE(svc_->start()) << svc_->log_tail();
  auto held = holders("mvl");
  ASSERT_EQ(held.size(), 1u) << "containers named mvl on " << held.size() << " engines";
  Json r = row("mvl");
  EXPECT_EQ(r["host"], engines_[held[0]].name) << r.dump();
  std::printf("service killed after the load: the restart left mvl on %s\n",
              r["host"].get<std::string>().c_str());
  if (r["host"] == "lab1") {
    EXPECT_TRUE(audited("mvl", "rolled back unfinished move"));
  }
  EXPECT_TRUE(move_images(held[0] == 0 ? 1 : 0).empty());
  std::string md5_after, password_after;
  start_and_read("mvl", &md5_after, &password_after);
  if (HasFatalFailure()) return;
  EXPECT_EQ(md5_after, md5);
  EXPECT_EQ(password_after, password);
}

// A crash after the book switched the container to lab2 but before lab1 was cleaned: the journal
// row says "finish", lab1 still holds the old container and the commit image. The restart
// completes the move: lab1's container (by id) and image go, lab2's stays booked and whole.
TEST_F(ServiceHostsMove, RestartCompletesAMoveTheBookHadSwitched) {
  start_lab();
  if (HasFatalFailure()) return;
  std::string md5;
  make_container("mvf", "lab1", 1, 1, false, nullptr, &md5);
  if (HasFatalFailure()) return;
  HttpClient alice(svc_->url(), alice_);
  ASSERT_TRUE(ok(alice.post_json(kApi + "/move", {{"name", "mvf"}, {"host", "lab2"}})));
  const Json moved = row("mvf");
  const std::string image = moved["engine_image"];
  ASSERT_EQ(image.rfind("gpulab-move:", 0), 0u) << image;
  EXPECT_EQ(moved["image"], kBoxImage);  // what it was created from, still
  svc_->stop();
  // What the crash left on lab1: a container of that name (from the image the move loaded, so
  // it carries the book's labels) and the commit image.
  auto on_lab2 = engines_[1].client->inspect_container("mvf");
  ASSERT_TRUE(on_lab2.ok());
  docker::CreateSpec old;
  old.name = "mvf";
  old.image = kBoxImage;
  old.labels = on_lab2->labels;
  auto old_id = engines_[0].client->create_container(old);
  ASSERT_TRUE(old_id.ok()) << old_id.error().to_string();
  docker::CommitSpec commit{"gpulab-move", image.substr(image.find(':') + 1), "", "", {}, {}, true};
  ASSERT_TRUE(engines_[0].client->commit(*old_id, commit).ok());
  {
    auto book = Store::open(svc_->db_path().string());
    ASSERT_TRUE(book.ok());
    MoveRecord m;
    m.tag = image.substr(image.find(':') + 1);
    m.container_id = (*book)->find_container("mvf")->id;
    m.name = "mvf";
    m.source_host = "lab1";
    m.target_host = "lab2";
    m.source_id = *old_id;
    m.prev_state = state::kExited;
    m.old_image = kBoxImage;
    m.state = "finish";
    (*book)->insert_move(m);
  }
  ASSERT_TRUE(svc_->start()) << svc_->log_tail();
  EXPECT_EQ(holders("mvf"), std::vector<int>{1});
  EXPECT_TRUE(move_images(0).empty());
  EXPECT_EQ(move_images(1).size(), 1u);
  EXPECT_TRUE(audited("mvf", "finished move"));
  EXPECT_EQ(row("mvf")["host"], "lab2");
  std::string md5_after, password;
  start_and_read("mvf", &md5_after, &password);
  EXPECT_EQ(md5_after, md5);
}

}  // namespace
}  // namespace gpulab::service::testing
