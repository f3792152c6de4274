// 1F1B and interleaved 1F1B action lists.
#include "train/parallel/pipeline_schedule.h"

#include <algorithm>

#include "core/error.h"

namespace gpulab::train::parallel {

namespace {

// 1F1B: stage s warms up with P - s - 1 forwards (the micro-batches in flight ahead of the last
// stage), then alternates forward and backward, then drains the remaining backwards.
std::vector<PipeAction> one_f_one_b(const PipelineShape& s, int stage) {
  const int m = s.micro_batches;
  const int warmup = std::min(s.stages - stage - 1, m);
  std::vector<PipeAction> out;
  int next_forward = 0, next_backward = 0;
  for (; next_forward < warmup; ++next_forward)
    out.push_back({PipeOp::kForward, next_forward, stage});
  while (next_forward < m) {
    out.push_back({PipeOp::kForward, next_forward++, stage});
    out.push_back({PipeOp::kBackward, next_backward++, stage});
  }
  while (next_backward < m) out.push_back({PipeOp::kBackward, next_backward++, stage});
  return out;
}

// The interleaved schedule's k-th forward (or backward) on a stage: rounds of P micro-batches go
// through chunk 0, then the same P through chunk 1, ... (backwards through the chunks in reverse),
// as Megatron-LM's get_model_chunk_id orders them.
PipeAction interleaved_action(const PipelineShape& s, int stage, int k, PipeOp op) {
  const int p = s.stages, v = s.virtual_stages;
  const int in_group = k % (p * v);
  int local = in_group / p;
  if (op == PipeOp::kBackward) local = v - 1 - local;
  const int micro = (k / (p * v)) * p + k % p;
  return {op, micro, local * p + stage};
}

std::vector<PipeAction> interleaved(const PipelineShape& s, int stage) {
  const int total = s.micro_batches * s.virtual_stages;
  // Every stage first fills its later chunks (V - 1 rounds of P), and earlier stages run two
  // more forwards per stage of distance from the last: the backward of their first micro-batch
  // comes back that much later.
  const int warmup =
      std::min(total, (s.stages - stage - 1) * 2 + (s.virtual_stages - 1) * s.stages);
  std::vector<PipeAction> out;
  int f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(interleaved_action(s, stage, f, PipeOp::kForward));
  while (f < total) {
    out.push_back(interleaved_action(s, stage, f++, PipeOp::kForward));
    out.push_back(interleaved_action(s, stage, b++, PipeOp::kBackward));
  }
  while (b < total) out.push_back(interleaved_action(s, stage, b++, PipeOp::kBackward));
  return out;
}

}  // namespace

void check_pipeline_shape(const PipelineShape& s) {
  if (s.stages < 1 || s.virtual_stages < 1 || s.micro_batches < 1)
    throw Exception(Code::kInvalidArgument,
                    "pipeline sizes must be at least 1 (" + std::to_string(s.stages) + " stages, " +
                        std::to_string(s.virtual_stages) + " virtual stages, " +
                        std::to_string(s.micro_batches) + " micro-batches)",
                    "use --pp 1 for no pipeline");
  if (s.virtual_stages > 1 && s.micro_batches % s.stages != 0) {
    const int up = (s.micro_batches + s.stages - 1) / s.stages * s.stages;
    throw Exception(Code::kInvalidArgument,
                    "the interleaved schedule runs micro-batches in rounds of the " +
                        std::to_string(s.stages) + " stages, and " +
                        std::to_string(s.micro_batches) + " micro-batches are not whole rounds",
                    "use " + std::to_string(up) + " micro-batches, or one virtual stage");
  }
}

std::vector<PipeAction> pipeline_schedule(const PipelineShape& s, int stage) {
  check_pipeline_shape(s);
  GPULAB_ASSERT(stage >= 0 && stage < s.stages, "pipeline stage out of range");
  return s.virtual_stages == 1 ? one_f_one_b(s, stage) : interleaved(s, stage);
}

std::string schedule_text(const std::vector<PipeAction>& actions) {
  std::string out;
  for (const auto& a : actions) {
    if (!out.empty()) out += ' ';
    out += (a.op == PipeOp::kForward ? "F" : "B") + std::to_string(a.micro_batch) + "." +
           std::to_string(a.chunk);
  }
  return out;
}

}  // namespace gpulab::train::parallel
