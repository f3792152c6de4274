// The checks of --pp and its flags on `gpulab train`, run before any rank starts (in the
// launching process), each refusal naming the numbers and a layout that works; and the
// micro-batch count a run uses.
#pragma once

#include <string>

#include "core/result.h"
#include "train/parallel/pipeline_schedule.h"
#include "train/train_options.h"

namespace gpulab::train::parallel {

// --pp above 1: a language model (llama, qwen2, gpt2) with at least one block per model chunk,
// a world size tp x pp divides, a batch per process the micro-batches divide, and no option the
// pipeline does not honour yet (--precision fp16; with --tp: --shard, bf16, --grad_accum,
// --label_smoothing, --init_weights). kInvalidArgument. (--tp's own checks:
// check_model_parallel_options.)
Status check_pipeline_options(const TrainOptions& o, int world_size);

// The run's schedule shape: --pp stages, the interleaved schedule's chunks per stage, and the
// micro-batches (--pp_micro_batches, or 0 when none of the defaults divides `batch`).
PipelineShape pipeline_shape(const TrainOptions& o, int64_t batch);

}  // namespace gpulab::train::parallel
