// Phase times add up per phase, keep the order phases first appear in, and print one line.
#include <gtest/gtest.h>

#include <thread>

#include "train/phase_times.h"

using gpulab::train::PhaseTimes;

TEST(PhaseTimes, AddsPerPhaseInFirstSeenOrder) {
  PhaseTimes t;
  t.add("data", 0.5);
  t.add("model", 2.0);
  t.add("checkpoints", 1.0);
  t.add("checkpoints", 0.25);
  EXPECT_EQ(t.line(),
            "Time outside the steady steps: data 0.50s, model 2.00s, checkpoints "
            "1.25s");
  EXPECT_DOUBLE_EQ(t.to_json()["checkpoints"].get<double>(), 1.25);
  t.time("final save", [] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  EXPECT_GE(t.to_json()["final save"].get<double>(), 0.02);
}
