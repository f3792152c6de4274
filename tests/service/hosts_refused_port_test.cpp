// A host port its engine holds while the book has it free (a stale allocation a dockerd kept
// after a crash, as SoakHosts' kills leave; here a container started on lab3 outside the
// service): a create whose SSH port the service chose gets another one (three tries at most), the
// refused port is not offered again, and a user's own host port there is refused naming it,
// leaving nothing behind. And a stopped container whose SSH port was taken meanwhile: its start
// (or restart) moves it to a new SSH port, keeping everything else; a user port taken meanwhile
// refuses the start, naming it.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "docker/client.h"
#include "lab_hosts.h"
#include "support/docker_fixture.h"

namespace gpulab::service::testing {
namespace {

class ServiceHostsRefusedPort : public LabHostsTest {
 protected:
  // The list row of `name` (null if none).
  Json row(HttpClient& c, const std::string& name) {
    const Json list = c.get(kApi + "/list").json();  // held: the loop reads inside it
    for (const auto& x : list["data"]["containers"])
      if (x["name"] == name) return x;
    return Json();
  }
  // Starts a container on engine i outside the service, holding `ports` at its address; the
  // engine then refuses them to anyone else. Removed when the test ends.
  void squat(int i, const std::vector<int>& ports) {
    docker::CreateSpec spec;
    spec.name = "squatter" + std::to_string(i) + "-" + std::to_string(squatters_.size());
    spec.image = kBoxImage;
    for (size_t k = 0; k < ports.size(); ++k)
      spec.ports.push_back({80 + static_cast<int>(k), "tcp", ports[k], engines_[i].address});
    auto id = engines_[i].client->create_container(spec);
    ASSERT_TRUE(id.ok()) << id.error().to_string();
    squatters_.emplace_back(new gpulab::testing::ContainerCleanup{*engines_[i].client, *id});
    ASSERT_TRUE(engines_[i].client->start_container(*id).ok());
  }
  // How many lines of the service log say `what`.
  int log_count(const std::string& what) const {
    auto text = read_file(dir_ / "svc" / "service.log");
    int n = 0;
    for (const auto& l : split(text.value_or(""), '\n')) n += l.find(what) != std::string::npos;
    return n;
  }

  // The host ports engine i publishes for container `name`, by container port.
  std::map<int, int> published(int i, const std::string& name) {
    std::map<int, int> out;
    auto info = engines_[i].client->inspect_container(name);
    if (info.ok())
      for (const auto& p : info->ports) out[p.container_port] = p.host_port;
    return out;
  }
  // Runs `script` in `name` on engine i: its output, or the failure.
  std::string run_in(int i, const std::string& name, const std::string& script) {
    auto r = engines_[i].client->exec(name, {"sh", "-c", script});
    if (!r.ok()) return "exec failed: " + r.error().to_string();
    return r->exit_code == 0 ? r->out : "exit " + std::to_string(r->exit_code) + ": " + r->err;
  }

  std::vector<std::unique_ptr<gpulab::testing::ContainerCleanup>> squatters_;
};

TEST_F(ServiceHostsRefusedPort, AnSshPortTheEngineRefusesIsReplacedAndAUserPortIsRefused) {
  Json cfg = lab_config();
  const int base = cfg["ssh_port_base"].get<int>();
  start(cfg);
  if (HasFatalFailure()) return;
  // SSH ports are base + 11, + 22, ...: lab3's engine holds the first two and base + 50 at its
  // address, outside the book.
  squat(2, {base + 11, base + 22, base + 50});
  if (HasFatalFailure()) return;

  HttpClient c(svc_->url());
  auto a = create(c, "a1", 0, "lab3");
  ASSERT_TRUE(ok(a)) << a.body << log_lines();
  EXPECT_EQ(row(c, "a1")["ssh_port"], base + 33) << "both refused ports are passed over";
  EXPECT_EQ(log_count("refused SSH port " + std::to_string(base + 11) + " "), 1);
  EXPECT_EQ(log_count("refused SSH port " + std::to_string(base + 22) + " "), 1);
  // Held back: the next create is not refused again.
  auto b = create(c, "b1", 0, "lab3");
  ASSERT_TRUE(ok(b)) << b.body;
  EXPECT_EQ(row(c, "b1")["ssh_port"], base + 44);
  EXPECT_EQ(log_count("refused SSH port"), 2) << log_lines();

  // A user's own port the engine refuses is the user's answer, not replaced.
  Json body = {{"name", "u1"},
               {"image", kBoxImage},
               {"gpu_count", 0},
               {"host", "lab3"},
               {"port", Json::array({std::to_string(base + 50) + ":80"})}};
  auto u = c.post_json(kApi + "/create", body);
  EXPECT_EQ(code(u), "PORT_CONFLICT") << u.body;
  EXPECT_NE(u.body.find(":" + std::to_string(base + 50) + " "), std::string::npos) << u.body;
  EXPECT_TRUE(row(c, "u1").is_null());
  EXPECT_FALSE(on_engine(2, "u1"));
  // ... and a port the engine refused before is refused at once, naming it.
  body["name"] = "v1";
  body["port"] = Json::array({std::to_string(base + 11) + ":80"});
  auto v = c.post_json(kApi + "/create", body);
  EXPECT_EQ(code(v), "PORT_CONFLICT") << v.body;
  EXPECT_NE(v.body.find(std::to_string(base + 11)), std::string::npos) << v.body;
  // Neither held the SSH port it had booked: the next create takes it.
  auto d = create(c, "d1", 0, "lab3");
  ASSERT_TRUE(ok(d)) << d.body;
  EXPECT_EQ(row(c, "d1")["ssh_port"], base + 55);
  EXPECT_EQ(log_count("refused SSH port"), 2);
  // Three refusals in a row end the create (its answer names the third port), nothing left,
  // and all three are held back: the next create on that host takes the fourth at once.
  squat(1, {base + 11, base + 22, base + 33});
  if (HasFatalFailure()) return;
  auto e1 = create(c, "e1", 0, "lab2");
  EXPECT_EQ(code(e1), "PORT_CONFLICT") << e1.body;
  EXPECT_NE(e1.body.find(":" + std::to_string(base + 33) + " "), std::string::npos) << e1.body;
  EXPECT_TRUE(row(c, "e1").is_null());
  EXPECT_FALSE(on_engine(1, "e1"));
  auto e2 = create(c, "e2", 0, "lab2");
  ASSERT_TRUE(ok(e2)) << e2.body;
  EXPECT_EQ(row(c, "e2")["ssh_port"], base + 44);
  EXPECT_EQ(log_count("refused SSH port"), 5) << log_lines();

  // A create that tried again is audited once, as ok; u1's engine refusal once, as failed.
  Json audit = c.get(kApi + "/audit?limit=100").json()["data"]["entries"];
  std::map<std::string, std::string> outcomes;
  for (const auto& e : audit)
    if (e["action"] == "create") outcomes[e["target"]] += e["outcome"].get<std::string>() + " ";
  EXPECT_EQ(outcomes["a1"], "ok ") << audit.dump();
  EXPECT_EQ(outcomes["b1"], "ok ") << audit.dump();
  EXPECT_EQ(outcomes["d1"], "ok ") << audit.dump();
  EXPECT_EQ(outcomes["u1"], "failed ") << audit.dump();
  EXPECT_EQ(outcomes["e1"], "failed ") << audit.dump();
}

// A stopped container whose SSH port something outside the service took meanwhile: its start is
// not refused; it is made again there from a commit of itself on a new SSH port (the answer says
// which), keeping its files, SSH password, GPU and user port, and the taken port is held back.
// `restart` of a stopped one does the same. A user's own port taken meanwhile refuses the start,
// naming it, and the container stays stopped with what it had.
TEST_F(ServiceHostsRefusedPort, AStartWhoseSshPortWasTakenMeanwhileMovesItToANewOne) {
  Json cfg = lab_config();
  const int base = cfg["ssh_port_base"].get<int>();
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  const int user_port = base + 60;
  Json body = {{"name", "s1"},
               {"image", kBoxImage},
               {"gpu_count", 1},
               {"host", "lab3"},
               {"port", Json::array({std::to_string(user_port) + ":80"})}};
  auto made = c.post_json(kApi + "/create", body);
  ASSERT_TRUE(ok(made)) << made.body;
  const Json before = row(c, "s1");
  ASSERT_EQ(before["ssh_port"], base + 11) << before.dump();
  const std::string password_file = docker::kLabSshPasswordFile;
  const std::string password = run_in(2, "s1", "echo kept > /kept.txt && cat " + password_file);
  ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", "s1"}})));
  squat(2, {base + 11});
  if (HasFatalFailure()) return;

  auto st = c.post_json(kApi + "/start", {{"name", "s1"}});
  ASSERT_TRUE(ok(st)) << st.body << log_lines();
  EXPECT_EQ(st.json()["data"]["ssh_port"], base + 22) << st.body;
  EXPECT_EQ(st.json()["data"]["ssh_port_was"], base + 11) << st.body;
  EXPECT_NE(st.json()["message"].get<std::string>().find("new SSH port"), std::string::npos);
  const Json after = row(c, "s1");
  EXPECT_EQ(after["ssh_port"], base + 22);
  EXPECT_EQ(after["status"], "running") << after.dump();
  EXPECT_EQ(after["gpu_uuids"], before["gpu_uuids"]) << after.dump();
  EXPECT_EQ(after["port_mappings"], before["port_mappings"]) << after.dump();
  EXPECT_EQ(published(2, "s1"), (std::map<int, int>{{22, base + 22}, {80, user_port}}));
  EXPECT_EQ(run_in(2, "s1", "cat /kept.txt " + password_file), "kept\n" + password);
  EXPECT_EQ(log_count("refused SSH port " + std::to_string(base + 11) + " "), 1);

  // restart of a stopped container: the same.
  ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", "s1"}})));
  squat(2, {base + 22});
  if (HasFatalFailure()) return;
  auto rs = c.post_json(kApi + "/restart", {{"name", "s1"}});
  ASSERT_TRUE(ok(rs)) << rs.body << log_lines();
  EXPECT_EQ(rs.json()["data"]["ssh_port"], base + 33) << rs.body;
  EXPECT_EQ(row(c, "s1")["status"], "running");
  EXPECT_EQ(run_in(2, "s1", "cat /kept.txt " + password_file), "kept\n" + password);
  // Both taken ports are held back: a new create there takes the next one at once.
  ASSERT_TRUE(ok(create(c, "n1", 0, "lab3")));
  EXPECT_EQ(row(c, "n1")["ssh_port"], base + 44);
  EXPECT_EQ(log_count("refused SSH port"), 2) << log_lines();

  // A user's port taken meanwhile: refused naming it; s1 stays stopped, as it was.
  ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", "s1"}})));
  squat(2, {user_port});
  if (HasFatalFailure()) return;
  auto u = c.post_json(kApi + "/start", {{"name", "s1"}});
  EXPECT_EQ(code(u), "PORT_CONFLICT") << u.body;
  EXPECT_NE(u.body.find("host port " + std::to_string(user_port)), std::string::npos) << u.body;
  const Json refused = row(c, "s1");
  EXPECT_NE(refused["status"], "running") << refused.dump();
  EXPECT_EQ(refused["ssh_port"], base + 33);
  EXPECT_TRUE(on_engine(2, "s1"));

  // The audit names each move: "ssh_port 20011 -> 20022".
  Json audit = c.get(kApi + "/audit?limit=100").json()["data"]["entries"];
  std::string moves;
  for (const auto& e : audit)
    if (e["target"] == "s1" && e.value("detail", std::string()).starts_with("ssh_port"))
      moves += e["action"].get<std::string>() + ": " + e["detail"].get<std::string>() + "; ";
  EXPECT_NE(
      moves.find("ssh_port " + std::to_string(base + 11) + " -> " + std::to_string(base + 22)),
      std::string::npos)
      << audit.dump();
  EXPECT_NE(
      moves.find("ssh_port " + std::to_string(base + 22) + " -> " + std::to_string(base + 33)),
      std::string::npos)
      << audit.dump();
}

// A GPU count change makes the container again from a commit of itself; a stopped one whose SSH
// port something outside took meanwhile comes up on a new one, and the answer and the audit say
// which (the user must connect there), as a start's do.
TEST_F(ServiceHostsRefusedPort, AGpuCountChangeOnANewSshPortSaysWhichInItsAnswer) {
  Json cfg = lab_config();
  const int base = cfg["ssh_port_base"].get<int>();
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_TRUE(ok(create(c, "g1", 0, "lab3")));
  ASSERT_EQ(row(c, "g1")["ssh_port"], base + 11);
  ASSERT_EQ(run_in(2, "g1", "echo kept > /kept.txt && echo done"), "done\n");
  ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", "g1"}})));
  squat(2, {base + 11});
  if (HasFatalFailure()) return;

  auto up = c.post_json(kApi + "/update-resources", {{"name", "g1"}, {"gpu_count", 1}});
  ASSERT_TRUE(ok(up)) << up.body << log_lines();
  EXPECT_EQ(up.json()["data"]["ssh_port"], base + 22) << up.body;
  EXPECT_EQ(up.json()["data"]["ssh_port_was"], base + 11) << up.body;
  EXPECT_EQ(up.json()["data"]["gpu_uuids"].size(), 1u) << up.body;
  const std::string said = up.json()["message"].get<std::string>();
  EXPECT_NE(said.find("updated successfully on a new SSH port, " + std::to_string(base + 22)),
            std::string::npos)
      << said;
  const Json now = row(c, "g1");
  EXPECT_EQ(now["status"], "running") << now.dump();
  EXPECT_EQ(published(2, "g1"), (std::map<int, int>{{22, base + 22}}));
  EXPECT_EQ(run_in(2, "g1", "cat /kept.txt"), "kept\n");
  std::vector<std::string> updates;  // the audit's update-resources entries of g1
  const auto listed = c.get(kApi + "/audit?limit=100");
  ASSERT_TRUE(ok(listed)) << listed.body;
  const Json audit = listed.json()["data"]["entries"];
  for (const auto& e : audit)
    if (e["target"] == "g1" && e["action"] == "update-resources")
      updates.push_back(e.value("detail", std::string()));
  ASSERT_EQ(updates.size(), 1u) << audit.dump();
  EXPECT_NE(updates.front().find("ssh_port " + std::to_string(base + 11) + " -> " +
                                 std::to_string(base + 22)),
            std::string::npos)
      << audit.dump();
}

// A start whose SSH port and the next three the service picks are all taken: the answer says the
// container is being made again and on which port the service finishes it; the row stays
// "recreating" on that fresh port (never a refused one), and the reconciler's next pass brings it
// up there with its files. All four taken ports are held back.
TEST_F(ServiceHostsRefusedPort, ARecreateRefusedThreeNewSshPortsIsFinishedOnAFourth) {
  Json cfg = lab_config();
  const int base = cfg["ssh_port_base"].get<int>();
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_TRUE(ok(create(c, "r1", 0, "lab3")));
  ASSERT_EQ(row(c, "r1")["ssh_port"], base + 11);
  ASSERT_EQ(run_in(2, "r1", "echo kept > /kept.txt && echo done"), "done\n");
  ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", "r1"}})));
  squat(2, {base + 11, base + 22, base + 33, base + 44});
  if (HasFatalFailure()) return;

  auto st = c.post_json(kApi + "/start", {{"name", "r1"}});
  EXPECT_EQ(code(st), "PORT_CONFLICT") << st.body;
  const std::string fourth = std::to_string(base + 55);
  EXPECT_NE(st.body.find("booked on SSH port " + fourth), std::string::npos) << st.body;
  EXPECT_NE(st.body.find(std::to_string(base + 44)), std::string::npos) << st.body;
  Json now = row(c, "r1");
  for (int i = 0; i < 100 && now["status"] != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = row(c, "r1");
  }
  EXPECT_EQ(now["status"], "running") << now.dump() << log_lines();
  EXPECT_EQ(now["ssh_port"], base + 55) << now.dump();
  EXPECT_EQ(published(2, "r1"), (std::map<int, int>{{22, base + 55}}));
  EXPECT_EQ(run_in(2, "r1", "cat /kept.txt"), "kept\n");
  EXPECT_EQ(log_count("refused SSH port"), 4) << log_lines();
  ASSERT_TRUE(ok(create(c, "n2", 0, "lab3")));
  EXPECT_EQ(row(c, "n2")["ssh_port"], base + 66);
}

}  // namespace
}  // namespace gpulab::service::testing
