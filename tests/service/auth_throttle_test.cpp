// The per-address back-off for failed token checks.
#include "service/http/auth_throttle.h"

#include <gtest/gtest.h>

namespace gpulab::service {
namespace {

using std::chrono::seconds;

TEST(AuthThrottle, FreeFailuresThenDoublingWaitsPerAddress) {
  AuthThrottle t(3, seconds(60), seconds(900));
  auto now = AuthThrottle::Clock::time_point{} + seconds(1000);
  for (int i = 0; i < 3; ++i) t.failed("10.0.0.1", now);
  EXPECT_EQ(t.retry_after_s("10.0.0.1", now), 0);
  t.failed("10.0.0.1", now);
  EXPECT_EQ(t.retry_after_s("10.0.0.1", now), 1);
  t.failed("10.0.0.1", now);
  EXPECT_EQ(t.retry_after_s("10.0.0.1", now), 2);
  for (int i = 0; i < 20; ++i) t.failed("10.0.0.1", now);
  EXPECT_EQ(t.retry_after_s("10.0.0.1", now), 60);  // capped
  EXPECT_EQ(t.retry_after_s("10.0.0.2", now), 0);   // another address is not slowed
  EXPECT_EQ(t.retry_after_s("10.0.0.1", now + seconds(61)), 0);
}

TEST(AuthThrottle, SuccessAndTimeForget) {
  AuthThrottle t(1, seconds(60), seconds(900));
  auto now = AuthThrottle::Clock::time_point{} + seconds(1000);
  t.failed("a", now);
  t.failed("a", now);
  EXPECT_GT(t.retry_after_s("a", now), 0);
  t.succeeded("a");
  EXPECT_EQ(t.retry_after_s("a", now), 0);
  t.failed("b", now);
  t.failed("b", now + seconds(1000));  // the first one is forgotten: one failure, still free
  EXPECT_EQ(t.retry_after_s("b", now + seconds(1000)), 0);
}

}  // namespace
}  // namespace gpulab::service
