// Forgetting a host retired from the config (POST hosts/forget) on the three real lab dockerds:
// its rows (a container and a ddp lease) go with their GPUs, ports and quota usage, the answer
// says what went per user, a restart does not bring them back, and the host put back later
// starts clean (the service's leftover container there is removed as one without a row). The
// refusals: a configured host, an unknown one, a bad name, and any non-admin (told nothing). The
// admins' hosts view (GET hosts) lists a retired host with what it holds until it is forgotten.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <thread>

#include "lab_hosts.h"

namespace gpulab::service::testing {
namespace {

class ServiceHostsForget : public LabHostsTest {
 protected:
  // The lab with tokens required; one port block for every restart (each lab_config() call
  // takes a new one).
  Json auth_config() const {
    Json cfg = lab_config();
    cfg["auth_required"] = true;
    return cfg;
  }
  struct Tokens {
    std::string admin, alice, bob;
  };
  // A port of the user's own on `cfg`'s block that is not one of its SSH ports.
  static int user_port(const Json& cfg) { return cfg["ssh_port_base"].get<int>() + 5; }
  // `name` on lab3 with 2 GPUs and the user's port mapped: the container whose rows lab3 keeps.
  static HttpResult create_on_lab3(HttpClient& c, const std::string& name, const Json& cfg) {
    const std::string port = std::to_string(user_port(cfg));
    return c.post_json(kApi + "/create", {{"name", name},
                                          {"image", kBoxImage},
                                          {"gpu_count", 2},
                                          {"host", "lab3"},
                                          {"port", Json::array({port + ":" + port})}});
  }
  // Starts the lab on `cfg` with boss (admin), alice and bob; alice makes "old" on lab3 and bob
  // leases "ddpl" there: the rows a retired lab3 keeps.
  Tokens book_rows_on_lab3(const Json& cfg) {
    start(cfg);
    if (HasFatalFailure()) return {};
    Tokens t{svc_->add_user("boss", true), svc_->add_user("alice", false),
             svc_->add_user("bob", false)};
    HttpClient alice(svc_->url(), t.alice), bob(svc_->url(), t.bob);
    auto made = create_on_lab3(alice, "old", cfg);
    EXPECT_TRUE(ok(made)) << made.body;
    auto lease = bob.post_json(kApi + "/leases", {{"name", "ddpl"}, {"host", "lab3"}});
    EXPECT_TRUE(ok(lease)) << lease.body;
    return t;
  }
  HttpResult forget(HttpClient& c, const Json& body) {
    return c.post_json(kApi + "/hosts/forget", body);
  }
  // The newest audit entries with this action and target.
  static int audit_count(HttpClient& admin, const std::string& action, const std::string& target,
                         const std::string& outcome) {
    int n = 0;
    const Json audit = admin.get(kApi + "/audit?limit=200").json();  // held: the loop reads in it
    for (const auto& e : audit["data"]["entries"])
      if (e["action"] == action && e["target"] == target && e["outcome"] == outcome) ++n;
    return n;
  }
};

std::set<std::string> strings_of(const Json& a, const char* key = nullptr) {
  std::set<std::string> s;
  for (const auto& v : a) s.insert(key ? v[key].get<std::string>() : v.get<std::string>());
  return s;
}

TEST_F(ServiceHostsForget, ARetiredHostsRowsAreForgottenAndTheirGpusPortsAndQuotaFreed) {
  const Json cfg = auth_config();
  const auto [admin_token, alice_token, bob_token] = book_rows_on_lab3(cfg);
  if (HasFailure()) return;
  {
    // Full with "old": the kept row is what blocks her after the restart.
    HttpClient admin(svc_->url(), admin_token);
    ASSERT_TRUE(ok(admin.post_json(kApi + "/quotas", {{"user", "alice"}, {"max_gpus", 2}})));
  }
  svc_->stop();
  Json two = cfg;
  two["hosts"].erase(2);
  start(two);
  if (HasFatalFailure()) return;
  HttpClient admin(svc_->url(), admin_token), alice(svc_->url(), alice_token);
  // Kept rows count against alice's quota: the problem this route solves.
  auto blocked = alice.post_json(kApi + "/create",
                                 {{"name", "fresh"}, {"image", kBoxImage}, {"gpu_count", 1}});
  EXPECT_EQ(code(blocked), "QUOTA_EXCEEDED") << blocked.body;

  auto refused = forget(alice, {{"name", "lab3"}});
  EXPECT_EQ(refused.status, 403) << refused.body;
  for (const char* secret : {"old", "ddpl", "bob", "GPU-lab3"})
    EXPECT_EQ(refused.body.find(secret), std::string::npos) << refused.body;
  auto unknown = forget(admin, {{"name", "lab9"}});
  EXPECT_EQ(code(unknown), "NOT_FOUND") << unknown.body;
  EXPECT_NE(unknown.body.find("'lab3'"), std::string::npos) << unknown.body;  // what can go

  auto dry = forget(admin, {{"name", "lab3"}, {"dry_run", true}});
  ASSERT_TRUE(ok(dry)) << dry.body;
  EXPECT_TRUE(dry.json()["data"]["dry_run"].get<bool>());
  EXPECT_EQ(dry.json()["data"]["containers"].size(), 2u) << dry.body;
  EXPECT_EQ(admin.get(kApi + "/list").json()["data"]["containers"].size(), 1u);

  auto gone = forget(admin, {{"name", "lab3"}});
  ASSERT_TRUE(ok(gone)) << gone.body;
  const Json d = gone.json()["data"];
  EXPECT_EQ(strings_of(d["containers"], "name"), (std::set<std::string>{"old", "ddpl"}));
  EXPECT_EQ(strings_of(d["by_user"]["alice"]), std::set<std::string>{"old"});
  EXPECT_EQ(strings_of(d["by_user"]["bob"]), std::set<std::string>{"ddpl"});
  EXPECT_EQ(strings_of(d["gpus_released"], "uuid"),
            (std::set<std::string>{"GPU-lab3-0", "GPU-lab3-1"}));
  std::set<int> ports;
  for (const auto& p : d["ports_released"]) {
    EXPECT_EQ(p["host"], "lab3");
    ports.insert(p["port"].get<int>());
  }
  EXPECT_EQ(ports.size(), 3u) << d.dump();  // the two SSH ports and the user's mapping
  EXPECT_TRUE(ports.count(user_port(cfg))) << d.dump();
  EXPECT_NE(gone.json()["message"].get<std::string>().find("not contacted"), std::string::npos);

  // Nothing of it is left: no rows, no lease, alice's usage back to zero and her GPUs usable.
  EXPECT_TRUE(admin.get(kApi + "/list").json()["data"]["containers"].empty());
  EXPECT_TRUE(admin.get(kApi + "/leases").json()["data"]["leases"].empty());
  auto usage = alice.get(kApi + "/list").json()["data"]["quota"]["usage"];
  EXPECT_EQ(usage["gpus"], 0) << usage.dump();
  EXPECT_EQ(usage["containers"], 0) << usage.dump();
  auto fresh = alice.post_json(kApi + "/create",
                               {{"name", "fresh"}, {"image", kBoxImage}, {"gpu_count", 2}});
  EXPECT_TRUE(ok(fresh)) << fresh.body;
  EXPECT_EQ(audit_count(admin, "forget-host", "lab3", "ok"), 1);
  EXPECT_EQ(audit_count(admin, "forget", "old", "ok"), 1);
  EXPECT_EQ(audit_count(admin, "POST /api/v1/gpu-docker/hosts/forget", "lab3", "refused"), 1);
  EXPECT_EQ(code(forget(admin, {{"name", "lab3"}})), "NOT_FOUND");  // nothing left to forget
  EXPECT_TRUE(on_engine(2, "old"));                                 // no engine was contacted

  // lab3 back in the config: its rows stay gone; the service's own container left there has no
  // row, so the reconciler removes it, and its GPUs and the user's port serve a new container.
  svc_->stop();
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient back(svc_->url(), admin_token);
  EXPECT_EQ(strings_of(back.get(kApi + "/list").json()["data"]["containers"], "name"),
            std::set<std::string>{"fresh"});
  for (int i = 0; i < 100 && on_engine(2, "old"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(on_engine(2, "old")) << log_lines();
  auto again = create_on_lab3(back, "again", cfg);  // its GPUs and alice's port are free again
  EXPECT_TRUE(ok(again)) << again.body;
}

// The view the dashboard's Hosts section draws: configured hosts with their state (one down from
// the start), and the retired host with its counts and owners, to admins only, until forgotten.
TEST_F(ServiceHostsForget, AdminsSeeARetiredHostsRowsUntilItIsForgotten) {
  const Json cfg = auth_config();
  const auto [admin_token, alice_token, bob_token] = book_rows_on_lab3(cfg);
  if (HasFailure()) return;
  {
    HttpClient admin(svc_->url(), admin_token);
    auto all_configured = admin.get(kApi + "/hosts");
    ASSERT_TRUE(ok(all_configured)) << all_configured.body;
    EXPECT_EQ(all_configured.json()["data"]["hosts"].size(), 3u) << all_configured.body;
    EXPECT_TRUE(all_configured.json()["data"]["retired"].empty()) << all_configured.body;
  }
  // lab3 retired; an engine that refuses connections joins, down from the start.
  svc_->stop();
  Json two = cfg;
  two["hosts"].erase(2);
  two["hosts"].push_back({{"name", "gone"}, {"url", "tcp://127.0.0.1:1"}, {"insecure", true}});
  start(two);
  if (HasFatalFailure()) return;
  HttpClient admin(svc_->url(), admin_token), alice(svc_->url(), alice_token),
      bob(svc_->url(), bob_token);

  auto view = admin.get(kApi + "/hosts");
  ASSERT_TRUE(ok(view)) << view.body;
  const Json d = view.json()["data"];
  EXPECT_EQ(strings_of(d["hosts"], "name"), (std::set<std::string>{"lab1", "lab2", "gone"}));
  for (const auto& h : d["hosts"]) {
    EXPECT_EQ(h["state"], h["name"] == "gone" ? "down" : "up") << h.dump();
    if (h["name"] == "gone") {
      EXPECT_FALSE(h.value("down_reason", "").empty()) << h.dump();
    }
    if (h["name"] == "lab2") {
      EXPECT_EQ(h["gpus"], 4) << h.dump();
    }
  }
  ASSERT_EQ(d["retired"].size(), 1u) << view.body;
  const Json& r = d["retired"][0];
  EXPECT_EQ(r["name"], "lab3");
  EXPECT_EQ(r["containers"], 1) << r.dump();
  EXPECT_EQ(r["leases"], 1) << r.dump();
  EXPECT_EQ(r["gpus"], 2) << r.dump();
  EXPECT_EQ(r["ports"], 3) << r.dump();  // the two SSH ports and alice's mapping
  EXPECT_EQ(strings_of(r["owners"]), (std::set<std::string>{"alice", "bob"}));

  // Users learn nothing of it: the view is refused whole, and status names configured hosts only.
  for (HttpClient* user : {&alice, &bob}) {
    auto refused = user->get(kApi + "/hosts");
    EXPECT_EQ(refused.status, 403) << refused.body;
    EXPECT_EQ(code(refused), "FORBIDDEN");
    auto status = user->get(kApi + "/status");
    ASSERT_TRUE(ok(status)) << status.body;
    for (const char* secret : {"lab3", "ddpl", "retired"})
      EXPECT_EQ(status.body.find(secret), std::string::npos) << status.body;
  }

  ASSERT_TRUE(ok(forget(admin, {{"name", "lab3"}})));
  auto after = admin.get(kApi + "/hosts");
  ASSERT_TRUE(ok(after)) << after.body;
  EXPECT_TRUE(after.json()["data"]["retired"].empty()) << after.body;
  EXPECT_EQ(after.json()["data"]["hosts"].size(), 3u) << after.body;
}

TEST_F(ServiceHostsForget, RefusesAConfiguredHostAnUnknownOneABadNameAndNonAdmins) {
  start(auth_config());
  if (HasFatalFailure()) return;
  HttpClient admin(svc_->url(), svc_->add_user("boss", true));
  HttpClient alice(svc_->url(), svc_->add_user("alice", false));
  ASSERT_TRUE(ok(alice.post_json(
      kApi + "/create",
      {{"name", "mine"}, {"image", kBoxImage}, {"gpu_count", 1}, {"host", "lab1"}})));

  auto configured = forget(admin, {{"name", "lab1"}});
  EXPECT_EQ(configured.status, 409) << configured.body;
  EXPECT_EQ(code(configured), "STATE_CONFLICT");
  EXPECT_NE(configured.json().value("hint", "").find("POST delete"), std::string::npos)
      << configured.body;
  auto unknown = forget(admin, {{"name", "lab9"}});
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  EXPECT_NE(unknown.json().value("hint", "").find("no host outside the config"), std::string::npos)
      << unknown.body;
  EXPECT_EQ(code(forget(admin, {{"name", "Lab/3"}})), "INVALID_REQUEST");
  EXPECT_EQ(code(forget(admin, {{"name", "lab9"}, {"force", true}})), "INVALID_REQUEST");
  EXPECT_EQ(code(forget(admin, {{"dry_run", true}})), "INVALID_REQUEST");

  // A non-admin gets the same answer whatever the host: nothing to learn from it.
  auto mine = forget(alice, {{"name", "lab1"}});
  EXPECT_EQ(mine.status, 403) << mine.body;
  EXPECT_EQ(code(mine), "FORBIDDEN");
  EXPECT_EQ(forget(alice, {{"name", "lab9"}}).body, mine.body);
  EXPECT_EQ(forget(alice, {{"name", "Lab/3"}}).body, mine.body);

  auto list = admin.get(kApi + "/list").json()["data"]["containers"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["host_state"], "up");
  EXPECT_TRUE(on_engine(0, "mine"));
  EXPECT_EQ(audit_count(admin, "forget-host", "lab1", "ok"), 0);
  EXPECT_EQ(audit_count(admin, "POST /api/v1/gpu-docker/hosts/forget", "lab1", "refused"), 2);
}

}  // namespace
}  // namespace gpulab::service::testing
