// Progress of an epoch when stdout is not a terminal (a log file, a pipe): plain lines with the
// batch count, the caller's figures and an ETA, at most one per interval; none when disabled.
#include <gtest/gtest.h>

#include <thread>

#include "train/progress.h"

namespace gpulab::train {
namespace {

TEST(Progress, LogGetsLinesWithAnEta) {
  ::testing::internal::CaptureStdout();  // stdout becomes a file: not a terminal
  {
    ProgressBar bar(true, 10, "Epoch 1/2", /*line_every_s=*/0.0);
    EXPECT_TRUE(bar.due(3));
    bar.update(3, "loss 1.2500, 80 img/s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    bar.update(6, "loss 0.9000, 90 img/s");
    EXPECT_FALSE(bar.due(10));  // the last batch: the epoch's own line follows
    bar.update(10, "loss 0.5000, 95 img/s");
    bar.clear();
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("Epoch 1/2: batch 3/10, loss 1.2500, 80 img/s, ETA "), std::string::npos)
      << out;
  EXPECT_NE(out.find("Epoch 1/2: batch 6/10, loss 0.9000, 90 img/s, ETA "), std::string::npos)
      << out;
  EXPECT_EQ(out.find("batch 10/10"), std::string::npos) << out;
  EXPECT_EQ(out.find('\r'), std::string::npos) << "no terminal redraws in a log";
}

// Beside the epoch's ETA, the run's: 1 batch done in >= 50 ms leaves 1 of this epoch and 2,400
// of later ones, so the run's ETA is at least 2,401 x 50 ms = 2m00s and far from the epoch's.
TEST(Progress, RunEtaCountsTheLaterEpochs) {
  ::testing::internal::CaptureStdout();
  {
    ProgressBar bar(true, 2, "Epoch 1/3", /*line_every_s=*/0.0);
    bar.set_later_batches(2400);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    bar.update(1, "loss 1.0");
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  const auto run = out.find(", run ");
  ASSERT_NE(run, std::string::npos) << out;
  EXPECT_NE(out.find("loss 1.0, ETA "), std::string::npos) << out;
  const std::string eta = out.substr(run + 6);  // "2m01s\n": minutes (or hours under load)
  EXPECT_TRUE(eta.find('m') != std::string::npos) << out;
}

// A resumed epoch (batches 0-89 trained before): 2 batches in >= 50 ms leave 99,908, so its ETA
// is at least 41m37s. Counted from batch 0, the rate was 92 batches in that time and the ETA
// about 54 s. The count shown stays the epoch's.
TEST(Progress, AResumedEpochsRateCountsOnlyItsOwnBatches) {
  ::testing::internal::CaptureStdout();
  {
    ProgressBar bar(true, 100000, "Epoch 2/2", /*line_every_s=*/0.0);
    bar.start_at(90);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    bar.update(92, "loss 1.0");
  }
  const std::string out = ::testing::internal::GetCapturedStdout();
  const auto at = out.find("batch 92/100000, loss 1.0, ETA ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string eta = out.substr(at + 31);  // "41m40s\n", or hours under load
  const auto m = eta.find('m');
  EXPECT_TRUE(eta.find('h') < m || (m != std::string::npos && std::stoi(eta.substr(0, m)) >= 41))
      << out;
}

TEST(Progress, AtMostOneLinePerInterval) {
  ::testing::internal::CaptureStdout();
  {
    ProgressBar bar(true, 1000, "Epoch 1/1", /*line_every_s=*/3600.0);
    for (int64_t b = 1; b < 1000; ++b) bar.update(b, "x");
    ProgressBar off(false, 10, "Epoch 1/1", 0.0);
    EXPECT_FALSE(off.due(1));
    off.update(1, "x");
  }
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

}  // namespace
}  // namespace gpulab::train
