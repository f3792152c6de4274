// A refusal changes nothing, on the three real lab dockerds: with lab3's engine killed (down) or
// stopped by SIGSTOP (frozen, asked before the host monitor notices), every mutating route on
// one of its containers (delete, stop, start, restart, update-resources, move from it and to it)
// answers 503 naming lab3, the book is as it was after each, and once the engine is back and the
// reconciler has passed over it, the book and the engine still hold every container as before.
// Without the fix a refused delete was finished by the reconciler once lab3 was back, and a
// refused update kept its new limits in the book.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "lab_hosts.h"

namespace gpulab::service::testing {
namespace {

using Clock = std::chrono::steady_clock;

class ServiceHostsRefusal : public LabHostsTest {
 protected:
  void TearDown() override {
    if (frozen_ > 0) ::kill(frozen_, SIGCONT);  // whatever failed, the engine runs again
    LabHostsTest::TearDown();
  }

  // What the book says of each container, in the fields a refused request must not change
  // (`with_state`: the booked state too).
  Json book(HttpClient& c, bool with_state) {
    Json rows = Json::object();
    auto r = c.get(kApi + "/list");
    EXPECT_TRUE(ok(r)) << r.status << " " << r.body;
    const Json listed = r.json();  // held: the loop reads inside it
    for (const auto& x : listed["data"]["containers"]) {
      Json row = {{"host", x["host"]},     {"gpu_uuids", x["gpu_uuids"]},  {"cpus", x["cpus"]},
                  {"memory", x["memory"]}, {"ssh_port", x["ssh_port"]},    {"id", x["id"]},
                  {"image", x["image"]},   {"pids_limit", x["pids_limit"]}};
      if (with_state) row["state"] = x["state"];
      rows[x["name"].get<std::string>()] = row;
    }
    return rows;
  }

  // Polls until `done` holds; false after `seconds`.
  template <typename Pred>
  bool wait_for(Pred done, int seconds) {
    const auto until = Clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  }

  // On lab3: "run3" running with 1 GPU, "stop3" stopped with 1 GPU; on lab1: "one1" stopped
  // (to be moved to lab3).
  void make_containers(HttpClient& c) {
    for (const auto& [name, host] : std::vector<std::pair<std::string, std::string>>{
             {"run3", "lab3"}, {"stop3", "lab3"}, {"one1", "lab1"}}) {
      auto r = create(c, name, name == "one1" ? 0 : 1, host);
      ASSERT_TRUE(ok(r)) << r.body;
    }
    for (const char* name : {"stop3", "one1"}) {
      auto r = c.post_json(kApi + "/stop", {{"name", name}});
      ASSERT_TRUE(ok(r)) << r.body;
    }
  }

  // Every mutating route on a lab3 container (or moving one there).
  static std::vector<std::pair<std::string, Json>> routes() {
    return {{"/delete", {{"name", "run3"}}},
            {"/delete", {{"name", "stop3"}}},
            {"/stop", {{"name", "run3"}}},
            {"/start", {{"name", "stop3"}}},
            {"/restart", {{"name", "run3"}}},
            {"/update-resources", {{"name", "run3"}, {"cpus", "1"}}},
            {"/update-resources", {{"name", "run3"}, {"memory", "256m"}, {"pids_limit", 77}}},
            {"/update-resources", {{"name", "run3"}, {"gpu_count", 2}}},
            {"/move", {{"name", "stop3"}, {"host", "lab1"}}},
            {"/move", {{"name", "one1"}, {"host", "lab3"}}}};
  }

  // One route: 503 naming lab3 within host_answer_seconds (2) and slack, and the book `before`.
  void expect_refused(HttpClient& c, const std::string& route, const Json& body,
                      const Json& before) {
    auto t0 = Clock::now();
    auto r = c.post_json(kApi + route, body);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_EQ(r.status, 503) << route << " " << body.dump() << ": " << r.body;
    EXPECT_NE(r.body.find("lab3"), std::string::npos) << route << ": " << r.body;
    EXPECT_LT(s, 4.0) << route << " took " << s << " s";
    EXPECT_EQ(book(c, true), before) << "after " << route << " " << body.dump();
  }

  // Once lab3 answers again and two reconcile passes began after that: the book as `before`
  // (states too when `with_state`) and each container on its engine with its booked id.
  void expect_unchanged_after_return(HttpClient& c, const Json& before, bool with_state) {
    ASSERT_TRUE(wait_for([&] { return host_state(c, "lab3")["state"] == "up"; }, 60))
        << c.get("/healthz").body;
    const long passes = reconcile_passes(c);
    ASSERT_GE(passes, 0) << "no gpulab_reconcile_passes_total in /metrics";
    ASSERT_TRUE(wait_for([&] { return reconcile_passes(c) >= passes + 2; }, 60)) << log_lines();
    Json after = book(c, with_state);
    Json want = before;
    if (!with_state)
      for (auto& [name, row] : want.items()) row.erase("state");
    EXPECT_EQ(after, want) << c.get(kApi + "/list").body << "\n" << log_lines();
    for (const auto& [name, row] : after.items()) {
      const int i = row["host"] == "lab1" ? 0 : row["host"] == "lab2" ? 1 : 2;
      auto info = engines_[i].client->inspect_container(name);
      ASSERT_TRUE(info.ok()) << name << " is gone from " << row["host"] << "\n" << log_lines();
      EXPECT_EQ(info->id.substr(0, 12), row["id"].get<std::string>()) << name;
    }
  }

  // SIGSTOPs the engine and waits (bounded) until every thread of it is stopped: a thread
  // running when the signal came may otherwise still take a connection first.
  bool freeze(pid_t pid) {
    frozen_ = pid;
    if (::kill(pid, SIGSTOP) != 0) return false;
    const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
    return wait_for(
        [&] {
          std::error_code ec;
          for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
            auto st = read_file(t.path() / "status").value_or("");
            if (st.find("State:\tT") == std::string::npos &&
                st.find("State:\tt") == std::string::npos)
              return false;
          }
          return !ec;
        },
        5);
  }

  pid_t frozen_ = 0;  // a SIGSTOPped engine that TearDown resumes
};

// lab3's engine SIGKILLed and marked down: every route refuses; restarted, nothing was done.
// Without the fix the refused delete was finished by the reconciler once lab3 was back, and the
// refused update kept its new cpus/memory in the book.
TEST_F(ServiceHostsRefusal, EveryMutatingRouteOnADownHostIsRefusedAndChangesNothing) {
  start(lab_config());
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  make_containers(c);
  if (HasFatalFailure()) return;
  const Json before = book(c, true);
  ASSERT_EQ(before.size(), 3u) << before.dump();
  const pid_t pid = engine_pid(2);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ASSERT_TRUE(wait_for([&] { return host_state(c, "lab3")["state"] == "down"; }, 30));
  for (const auto& [route, body] : routes()) expect_refused(c, route, body, before);
  std::string err;
  ASSERT_TRUE(restart_engines(&err)) << err;
  // A restarted dockerd stops its containers (no live-restore): states may change, nothing else.
  expect_unchanged_after_return(c, before, false);
}

// lab3's engine SIGSTOPped just before each route, so the route's own engine call meets the hung
// engine (connection and TLS handshake never finish): it gives up within host_answer_seconds with
// a 503 and takes back what it had booked (a delete's intent, an update's limits or GPUs); the
// engine is resumed and back up before the next. Once the reconciler has passed over lab3,
// every container is exactly as it was, states included.
TEST_F(ServiceHostsRefusal, EveryMutatingRouteOnAFrozenHostIsRefusedAndChangesNothing) {
  start(lab_config());
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  make_containers(c);
  if (HasFatalFailure()) return;
  const Json before = book(c, true);
  ASSERT_EQ(before.size(), 3u) << before.dump();
  const pid_t pid = engine_pid(2);
  ASSERT_GT(pid, 0);
  for (const auto& [route, body] : routes()) {
    ASSERT_TRUE(freeze(pid)) << "lab3's dockerd did not stop";
    expect_refused(c, route, body, before);
    ASSERT_EQ(::kill(pid, SIGCONT), 0);
    frozen_ = 0;
    ASSERT_TRUE(wait_for([&] { return host_state(c, "lab3")["state"] == "up"; }, 30))
        << "lab3 not up after " << route << ": " << c.get("/healthz").body;
  }
  expect_unchanged_after_return(c, before, true);
}

}  // namespace
}  // namespace gpulab::service::testing
