// The same engine under two names, on the real lab dockerds: lab1's engine listed twice (its TCP
// URL as "lab1" and again as "lab1b") is refused at start, naming both hosts and the engine ID;
// the book would otherwise hold one machine's GPUs and containers twice. A second name that
// first answers after start (down then) is kept down with the same reason.
#include <gtest/gtest.h>

#include "lab_hosts.h"

namespace gpulab::service::testing {
namespace {

class ServiceHostsSameEngine : public LabHostsTest {};

TEST_F(ServiceHostsSameEngine, OneEngineUnderTwoNamesIsRefusedAtStart) {
  Json cfg = lab_config();
  Json twice = host_json(0, 0);
  twice["name"] = "lab1b";
  twice.erase("gpus");
  cfg["hosts"].push_back(twice);
  svc_ = std::make_unique<ServiceProcess>(dir_ / "svc", cfg);
  EXPECT_FALSE(svc_->start()) << "a lab with one engine twice started";
  const std::string log = svc_->log_tail();
  EXPECT_NE(log.find("hosts 'lab1' and 'lab1b' are the same Docker engine"), std::string::npos)
      << log;
  svc_.reset();
}

TEST_F(ServiceHostsSameEngine, OneEngineAnsweringLaterUnderASecondNameStaysDown) {
  // lab1b: lab1's engine through a unix socket path that does not exist yet (down at start).
  const std::filesystem::path late = dir_ / "late.sock";
  Json cfg = lab_config();
  cfg["hosts"].push_back({{"name", "lab1b"}, {"url", "unix://" + late.string()}});
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  ASSERT_EQ(host_state(c, "lab1b").value("state", ""), "down");
  std::filesystem::create_symlink(engines_[0].unix_url.substr(7), late);
  // The host monitor checks every second: lab1b answers, is compared, and stays down.
  Json h;
  for (int i = 0; i < 100; ++i) {
    h = host_state(c, "lab1b");
    if (h.value("down_reason", "").find("same Docker engine") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(h.value("state", ""), "down") << h.dump();
  EXPECT_NE(h.value("down_reason", "").find("hosts 'lab1' and 'lab1b' are the same Docker engine"),
            std::string::npos)
      << h.dump();
  EXPECT_EQ(host_state(c, "lab1").value("state", ""), "up");
  // Still down a few checks later (asked again each check), and logged once.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_EQ(host_state(c, "lab1b").value("state", ""), "down");
  const std::string log = read_file(dir_ / "svc" / "service.log").value_or("");
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("host lab1b stays down", at)) != std::string::npos; ++at)
    ++lines;
  EXPECT_EQ(lines, 1u) << log_lines();
}

}  // namespace
}  // namespace gpulab::service::testing
