// Signal names from the one table: named signals, and a number for the rest.
#include <gtest/gtest.h>

#include <csignal>

#include "core/signal_name.h"

using namespace gpulab;

TEST(SignalName, TableAndFallback) {
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_STREQ(signal_abbrev(SIGABRT), "ABRT");
  EXPECT_EQ(signal_abbrev(63), nullptr);
  EXPECT_EQ(signal_name(63), "signal 63");
}
