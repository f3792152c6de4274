// The pipeline schedules as plain lists of actions per stage (no libtorch): 1F1B (PipeDream-
// Flush, as Megatron-LM runs it: warm-up forwards, then one forward and one backward in turn,
// then the cool-down backwards) and the interleaved 1F1B with virtual stages (each stage runs
// several model chunks, chunk c on stage c % P). The executor (pipeline_executor.h) runs them;
// pipeline_timeline.h costs them.
#pragma once

#include <string>
#include <vector>

namespace gpulab::train::parallel {

enum class PipeOp { kForward, kBackward };

struct PipeAction {
  PipeOp op = PipeOp::kForward;
  int micro_batch = 0;
  int chunk = 0;  // the model chunk's index in model order, v·stages + stage
  bool operator==(const PipeAction&) const = default;
};

struct PipelineShape {
  int stages = 1;
  int virtual_stages = 1;  // model chunks per stage; more than 1: the interleaved schedule
  int micro_batches = 1;
  int chunks() const { return stages * virtual_stages; }
  int stage_of(int chunk) const { return chunk % stages; }
};

// Throws gpulab::Exception (kInvalidArgument) for sizes below 1, and for the interleaved
// schedule a number of micro-batches that is not a multiple of the stages (its rounds of P
// micro-batches per chunk, as Megatron-LM requires), naming the numbers and one that works.
void check_pipeline_shape(const PipelineShape& s);

// Stage `stage`'s actions in the order it runs them: 1F1B when virtual_stages is 1, else the
// interleaved 1F1B. Every micro-batch is forwarded and backwarded once through each of the
// stage's chunks; a stage holds at most stages - stage activations in flight (1F1B).
std::vector<PipeAction> pipeline_schedule(const PipelineShape& s, int stage);

// "F3.1" (forward of micro-batch 3 through chunk 1) / "B3.1", space-separated: for messages.
std::string schedule_text(const std::vector<PipeAction>& actions);

}  // namespace gpulab::train::parallel
