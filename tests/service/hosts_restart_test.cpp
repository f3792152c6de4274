// A host's engine restart, on the real lab dockerds (no live-restore, as Docker ships): lab3's
// dockerd stopped with SIGTERM (it stops its containers) and started again on its data root; with
// restart_on_host_return the container the book has as running is started again once lab3
// answers, the one its owner had stopped stays stopped, and /healthz says lab3 runs without
// live-restore.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "lab_hosts.h"

namespace gpulab::service::testing {
namespace {

using Clock = std::chrono::steady_clock;

class ServiceHostsRestart : public LabHostsTest {
 protected:
  template <typename Pred>
  bool wait_for(Pred done, int seconds) {
    const auto until = Clock::now() + std::chrono::seconds(seconds);
    while (!done()) {
      if (Clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return true;
  }
  // The engine's own state of a container on lab3 ("" when it cannot say).
  std::string engine_state(const std::string& name) {
    auto info = engines_[2].client->inspect_container(name);
    return info.ok() ? info->status : std::string();
  }
};

TEST_F(ServiceHostsRestart, ContainersBookedRunningAreStartedWhenTheirHostReturns) {
  Json cfg = lab_config();
  cfg["restart_on_host_return"] = true;
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_TRUE(ok(create(c, "runs", 0, "lab3")));
  ASSERT_TRUE(ok(create(c, "rests", 0, "lab3")));
  ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", "rests"}})));
  EXPECT_EQ(host_state(c, "lab3").value("live_restore", true), false) << host_state(c, "lab3");

  const pid_t pid = engine_pid(2);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);  // a clean dockerd stop: it stops its containers
  ASSERT_TRUE(wait_for([&] { return ::kill(pid, 0) != 0; }, 60)) << "dockerd did not exit";
  ASSERT_TRUE(wait_for([&] { return host_state(c, "lab3")["state"] == "down"; }, 30));
  std::string err;
  ASSERT_TRUE(restart_engines(&err)) << err;
  ASSERT_TRUE(wait_for([&] { return host_state(c, "lab3")["state"] == "up"; }, 60));
  ASSERT_TRUE(wait_for([&] { return engine_state("runs") == "running"; }, 30))
      << "runs is " << engine_state("runs") << "\n"
      << log_lines();
  EXPECT_EQ(engine_state("rests"), "exited");
  auto list = c.get(kApi + "/list").json()["data"]["containers"];
  for (const auto& x : list) {
    const std::string want = x["name"] == "runs" ? "running" : "exited";
    EXPECT_EQ(x["state"], want) << x.dump();
  }
  const std::string log = read_file(dir_ / "svc" / "service.log").value_or("");
  EXPECT_NE(log.find("without live-restore"), std::string::npos);
}

}  // namespace
}  // namespace gpulab::service::testing
