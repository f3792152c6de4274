// --pp checks and the run's pipeline shape (see pipeline_options.h).
#include "train/parallel/pipeline_options.h"

#include <fmt/format.h>

#include "core/error.h"
#include "train/models/decoder_config.h"
#include "train/models/registry.h"
#include "train/parallel/mesh_layout.h"
#include "train/parallel/option_status.h"
#include "train/parallel/pipeline_split.h"

namespace gpulab::train::parallel {

namespace {

bool is_interleaved(const TrainOptions& o) {
  return o.pp_schedule == "interleaved";
}

}  // namespace

PipelineShape pipeline_shape(const TrainOptions& o, int64_t batch) {
  PipelineShape s;
  s.stages = static_cast<int>(o.pp);
  s.virtual_stages = is_interleaved(o) ? static_cast<int>(o.pp_virtual_stages) : 1;
  s.micro_batches = static_cast<int>(o.pp_micro_batches);
  if (s.micro_batches > 0) return s;
  // The interleaved schedule runs rounds of pp micro-batches per chunk.
  const int64_t step = is_interleaved(o) ? o.pp : 1;
  for (int64_t m = 2 * o.pp; m >= step; m -= step)
    if (batch % m == 0) {
      s.micro_batches = static_cast<int>(m);
      break;
    }
  return s;
}

Status check_pipeline_options(const TrainOptions& o, int world_size) {
  if (o.pp == 1) return ok_status();
  if (o.task == "grpo" || !is_language_model(o.model))
    return refuse(fmt::format("--pp {} splits a language model's blocks into stages; --model {}{} "
                              "is not one it trains",
                              o.pp, o.model, o.task == "grpo" ? " under --task grpo" : ""),
                  "train it without --pp");
  auto cfg = find_decoder_config(o.model);
  if (!cfg) return cfg.error();
  const int pp = static_cast<int>(o.pp);
  const int v = is_interleaved(o) ? static_cast<int>(o.pp_virtual_stages) : 1;
  if (auto st = as_status([&] { check_pipeline_split(cfg->num_layers, pp, v); }); !st) return st;
  // Tensor-parallel groups inside the stages (--tp): the data-parallel ranks are the rest.
  const int tp = static_cast<int>(o.tp);
  if (auto st = as_status([&] { (void)MeshLayout(world_size, tp, pp); }); !st) return st;
  const int64_t batch = batch_per_process(o, world_size / (tp * pp));
  const PipelineShape s = pipeline_shape(o, batch);
  if (s.micro_batches == 0 || batch % s.micro_batches != 0)
    return refuse(
        fmt::format("--pp {}: a batch of {} sequences per process does not split into {}", pp,
                    batch,
                    s.micro_batches > 0 ? fmt::format("{} micro-batches", s.micro_batches)
                                        : fmt::format("micro-batches (a multiple of {} up to {})",
                                                      is_interleaved(o) ? pp : 1, 2 * pp)),
        fmt::format("pass a --batch_size that is a multiple of {}, or a --pp_micro_batches that "
                    "divides {}",
                    is_interleaved(o) ? pp : 2 * pp, batch));
  return as_status([&] { check_pipeline_shape(s); });
}

}  // namespace gpulab::train::parallel
