// The stop signal the ranks agree on: a rank that has not yet seen the launcher's signal names
// the one the others saw (CI once printed "Stopped by SIGTERM" after a Ctrl-C of two ranks).
#include <gtest/gtest.h>

#include <csignal>

#include "train/stop_signal.h"

namespace gpulab::train {
namespace {

TEST(StopSignal, NoRankSawASignalMeansNoStop) {
  EXPECT_EQ(agreed_stop_signal(0, 0, 0), 0);
}

TEST(StopSignal, ARankThatHasNotSeenCtrlCYetStillNamesIt) {
  EXPECT_EQ(agreed_stop_signal(0, 1, 0), SIGINT);
  EXPECT_EQ(agreed_stop_signal(SIGINT, 2, 0), SIGINT);
}

TEST(StopSignal, AnyTerminationOutranksCtrlC) {
  EXPECT_EQ(agreed_stop_signal(0, 1, 1), SIGTERM);
  EXPECT_EQ(agreed_stop_signal(SIGINT, 1, 1), SIGTERM);
  EXPECT_EQ(agreed_stop_signal(SIGTERM, 0, 1), SIGTERM);
}

}  // namespace
}  // namespace gpulab::train
