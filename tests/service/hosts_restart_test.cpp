// A host's engine restart, on the real lab dockerds (no live-restore, as Docker ships): lab3's
// dockerd stopped with SIGTERM (it stops its containers) and started again on its data root; with
// restart_on_host_return the container the book has as running is started again once lab3
// answers, the one its owner had stopped stays stopped, and /healthz says lab3 runs without
// live-restore. And one whose SSH port was taken on lab3 while it was away runs on a new one.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
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
  // The service over the three engines, restart_on_host_return on.
  void start_restarting() {
    Json cfg = lab_config();
    cfg["restart_on_host_return"] = true;
    start(cfg);
  }
  // Stops lab3's dockerd cleanly (it stops its containers) and waits until the service marks
  // lab3 down.
  void stop_lab3(HttpClient& c) {
    const pid_t pid = engine_pid(2);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(::kill(pid, SIGTERM), 0);
    ASSERT_TRUE(wait_for([&] { return ::kill(pid, 0) != 0; }, 60)) << "dockerd did not exit";
    ASSERT_TRUE(wait_for([&] { return host_state(c, "lab3")["state"] == "down"; }, 30));
  }
  // The engine's own state of a container on lab3 ("" when it cannot say).
  std::string engine_state(const std::string& name) {
    auto info = engines_[2].client->inspect_container(name);
    return info.ok() ? info->status : std::string();
  }
};

TEST_F(ServiceHostsRestart, ContainersBookedRunningAreStartedWhenTheirHostReturns) {
  start_restarting();
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_TRUE(ok(create(c, "runs", 0, "lab3")));
  ASSERT_TRUE(ok(create(c, "rests", 0, "lab3")));
  ASSERT_TRUE(ok(c.post_json(kApi + "/stop", {{"name", "rests"}})));
  EXPECT_EQ(host_state(c, "lab3").value("live_restore", true), false) << host_state(c, "lab3");

  stop_lab3(c);
  if (HasFatalFailure()) return;
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

// A socket listening at `address`:`port` in the network namespace /run/netns/`ns`, or -1 with
// `why` set. Made on a thread that enters it (setns moves only the calling thread): this process
// stays put.
int listen_in_netns(const std::string& ns, const std::string& address, int port, std::string* why) {
  int out = -1;
  std::thread([&] {
    const int nsfd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || ::setns(nsfd, CLONE_NEWNET) != 0) {
      *why = "entering " + ns + ": " + std::strerror(errno);
    } else {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in at{};
      at.sin_family = AF_INET;
      at.sin_port = htons(static_cast<uint16_t>(port));
      ::inet_pton(AF_INET, address.c_str(), &at.sin_addr);
      if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0 &&
          ::listen(fd, 4) == 0)
        out = fd;
      else
        *why = std::string("listening: ") + std::strerror(errno);
      if (out < 0 && fd >= 0) ::close(fd);
    }
    if (nsfd >= 0) ::close(nsfd);
  }).join();
  return out;
}

// The same return, with the running container's SSH port taken on lab3 while lab3 was away (a
// listener at lab3's address in its network namespace, as a returning engine's stale allocation
// would hold it): the container is recreated there on a new SSH port and runs with its files,
// and the audit says which port it moved from and to.
TEST_F(ServiceHostsRestart, AReturningContainerWhoseSshPortWasTakenRunsOnANewOne) {
  start_restarting();
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_TRUE(ok(create(c, "runs", 0, "lab3")));
  auto ssh_port = [&] {
    const Json list = c.get(kApi + "/list").json();
    for (const auto& x : list["data"]["containers"])
      if (x["name"] == "runs") return x["ssh_port"].get<int>();
    return 0;
  };
  const int old_port = ssh_port();
  ASSERT_GT(old_port, 0);
  auto w = engines_[2].client->exec("runs", {"sh", "-c", "echo kept > /kept.txt"});
  ASSERT_TRUE(w.ok() && w->exit_code == 0);

  stop_lab3(c);
  if (HasFatalFailure()) return;
  std::string why;
  const int squat = listen_in_netns("gpulab-lab3", engines_[2].address, old_port, &why);
  ASSERT_GE(squat, 0) << "cannot listen at " << engines_[2].address << ":" << old_port
                      << " in lab3's network namespace: " << why;
  std::string err;
  const bool restarted = restart_engines(&err);
  const bool runs = restarted && wait_for([&] { return engine_state("runs") == "running"; }, 60);
  ::close(squat);
  ASSERT_TRUE(restarted) << err;
  ASSERT_TRUE(runs) << "runs is " << engine_state("runs") << "\n" << log_lines();
  EXPECT_NE(ssh_port(), old_port);
  auto r = engines_[2].client->exec("runs", {"cat", "/kept.txt"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->out, "kept\n");
  Json audit = c.get(kApi + "/audit?limit=100").json()["data"]["entries"];
  std::string said;
  for (const auto& e : audit)
    if (e["target"] == "runs" && e["outcome"] == "restarted") said = e.value("detail", "");
  EXPECT_NE(said.find("ssh_port " + std::to_string(old_port) + " -> " + std::to_string(ssh_port()) +
                      " (taken meanwhile)"),
            std::string::npos)
      << audit.dump();
}

}  // namespace
}  // namespace gpulab::service::testing
