// The pipeline schedules as action lists: 1F1B's warm-up, steady and cool-down phases, the
// interleaved order, each micro-batch run once forward and once backward through every chunk,
// no deadlock, and the simulated bubble equal to (P-1)/(V·M+P-1).
#include <gtest/gtest.h>

#include <set>
#include <tuple>

#include "core/error.h"
#include "train/parallel/pipeline_schedule.h"
#include "train/parallel/pipeline_timeline.h"

using namespace gpulab;
using namespace gpulab::train::parallel;

namespace {

std::vector<std::vector<PipeAction>> all_stages(const PipelineShape& s) {
  std::vector<std::vector<PipeAction>> out;
  for (int stage = 0; stage < s.stages; ++stage) out.push_back(pipeline_schedule(s, stage));
  return out;
}

TEST(PipelineSchedule, OneFOneBHasWarmupSteadyAndCooldown) {
  const PipelineShape s{4, 1, 6};
  EXPECT_EQ(schedule_text(pipeline_schedule(s, 0)),
            "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 B3.0 B4.0 B5.0");
  EXPECT_EQ(schedule_text(pipeline_schedule(s, 2)),
            "F0.2 F1.2 B0.2 F2.2 B1.2 F3.2 B2.2 F4.2 B3.2 F5.2 B4.2 B5.2");
  // The last stage has no warm-up: each forward is followed by its backward.
  EXPECT_EQ(schedule_text(pipeline_schedule(s, 3)),
            "F0.3 B0.3 F1.3 B1.3 F2.3 B2.3 F3.3 B3.3 F4.3 B4.3 F5.3 B5.3");
  // Fewer micro-batches than stages: all forwards, then all backwards.
  EXPECT_EQ(schedule_text(pipeline_schedule({4, 1, 2}, 0)), "F0.0 F1.0 B0.0 B1.0");
}

TEST(PipelineSchedule, InterleavedRunsRoundsOfStagesThroughEachChunk) {
  const PipelineShape s{2, 2, 4};
  // Stage 0 holds chunks 0 and 2: micro-batches 0,1 through chunk 0, then through chunk 2, ...
  EXPECT_EQ(schedule_text(pipeline_schedule(s, 0)),
            "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 B2.2 B3.2 B2.0 B3.0");
  EXPECT_EQ(schedule_text(pipeline_schedule(s, 1)).substr(0, 14), "F0.1 F1.1 F0.3");
}

TEST(PipelineSchedule, EveryMicroBatchOnceEachWayThroughEveryChunk) {
  for (const PipelineShape s :
       {PipelineShape{2, 1, 4}, PipelineShape{4, 1, 8}, PipelineShape{3, 1, 2},
        PipelineShape{2, 2, 4}, PipelineShape{4, 2, 8}, PipelineShape{2, 3, 6}}) {
    std::set<std::tuple<PipeOp, int, int>> seen;
    size_t count = 0;
    for (int stage = 0; stage < s.stages; ++stage)
      for (const auto& a : pipeline_schedule(s, stage)) {
        EXPECT_EQ(s.stage_of(a.chunk), stage);
        seen.insert({a.op, a.micro_batch, a.chunk});
        ++count;
      }
    EXPECT_EQ(count, static_cast<size_t>(2 * s.micro_batches * s.chunks()));
    EXPECT_EQ(seen.size(), count);
  }
}

TEST(PipelineSchedule, SimulatedBubbleIsTheFormulaAndNothingDeadlocks) {
  for (const PipelineShape s :
       {PipelineShape{2, 1, 4}, PipelineShape{2, 1, 8}, PipelineShape{4, 1, 8},
        PipelineShape{4, 1, 16}, PipelineShape{2, 2, 4}, PipelineShape{4, 2, 8},
        PipelineShape{2, 2, 8}}) {
    const Timeline t = simulate_pipeline(s, all_stages(s), 1, 2);
    ASSERT_FALSE(t.deadlocked) << s.stages << "x" << s.virtual_stages << " M " << s.micro_batches;
    // Equal stages and a backward twice a forward: the fill and drain are exactly P-1 slots of
    // (f + b) / V on every stage, so the formula holds to rounding.
    EXPECT_NEAR(t.idle_fraction(), ideal_bubble(s), 1e-12)
        << s.stages << "x" << s.virtual_stages << " M " << s.micro_batches;
  }
  EXPECT_DOUBLE_EQ(ideal_bubble({2, 1, 4}), 0.2);
  EXPECT_DOUBLE_EQ(ideal_bubble({2, 2, 4}), 1.0 / 9.0);
}

TEST(PipelineSchedule, ADeadlockingOrderIsFound) {
  // Stage 1 asks for micro-batch 1 before 0: stage 0 waits for B0 forever.
  const PipelineShape s{2, 1, 2};
  auto lists = all_stages(s);
  lists[1] = {{PipeOp::kForward, 1, 1},
              {PipeOp::kBackward, 1, 1},
              {PipeOp::kForward, 0, 1},
              {PipeOp::kBackward, 0, 1}};
  lists[0] = {{PipeOp::kForward, 0, 0},
              {PipeOp::kBackward, 0, 0},
              {PipeOp::kForward, 1, 0},
              {PipeOp::kBackward, 1, 0}};
  EXPECT_TRUE(simulate_pipeline(s, lists).deadlocked);
}

TEST(PipelineSchedule, InterleavedNeedsWholeRoundsOfMicroBatches) {
  try {
    pipeline_schedule({2, 2, 3}, 0);
    FAIL() << "3 micro-batches over 2 interleaved stages were accepted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(e.hint().find("use 4 micro-batches"), std::string::npos) << e.hint();
  }
  EXPECT_NO_THROW(pipeline_schedule({2, 1, 3}, 0));
  EXPECT_THROW(pipeline_schedule({2, 1, 0}, 0), Exception);
}

}  // namespace
