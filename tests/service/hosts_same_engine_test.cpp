// The same engine under two names, on the real lab dockerds: lab1's engine listed twice (its TCP
// URL as "lab1" and again as "lab1b") is refused at start, naming both hosts and the engine ID;
// the book would otherwise hold one machine's GPUs and containers twice.
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

}  // namespace
}  // namespace gpulab::service::testing
