// --tp / --pp checks (see tp_options.h).
#include "train/parallel/tp_options.h"

#include <fmt/format.h>

#include <numeric>

#include "core/error.h"
#include "train/models/decoder_config.h"
#include "train/models/registry.h"
#include "train/parallel/mesh_layout.h"
#include "train/parallel/option_status.h"
#include "train/parallel/pipeline_options.h"
#include "train/parallel/tp_families.h"
#include "train/parallel/tp_llama_state.h"

namespace gpulab::train::parallel {

namespace {

Status check_tp_shape(const TrainOptions& o, int world_size) {
  auto cfg = find_decoder_config(o.model);
  if (!cfg) return cfg.error();
  if (!has_tp_model(cfg->family))
    return refuse(fmt::format("--tp {}: the {} family ({}) has no tensor-parallel model", o.tp,
                              cfg->family, o.model),
                  "train it without --tp (data parallel, or --shard), or pick a model of a "
                  "family with one: " +
                      tp_families());
  if (auto st = as_status([&] { check_tp_layout(*cfg, static_cast<int>(o.tp)); }); !st) return st;
  if (auto st = as_status([&] { (void)MeshLayout(world_size, static_cast<int>(o.tp), 1); }); !st)
    return st;
  if (o.sequence_parallel == "on" && o.seq_len % o.tp != 0)
    return refuse(fmt::format("--seq_len {} does not split over --tp {}: sequence parallelism "
                              "gives each tensor-parallel rank seq_len / tp positions",
                              o.seq_len, o.tp),
                  fmt::format("pass --seq_len {} (a multiple of {}), or --sequence_parallel off",
                              (o.seq_len / o.tp + 1) * o.tp, o.tp));
  return ok_status();
}

// Everything --tp asks of the job once a device mesh is built (any TP size, 1 included).
Status check_tp_model(const TrainOptions& o, int world_size) {
  if (o.task == "grpo" || !is_language_model(o.model))
    return refuse(fmt::format("--tp {} splits a language model's layers; --model {}{} is not one "
                              "it trains",
                              o.tp, o.model, o.task == "grpo" ? " under --task grpo" : ""),
                  "train it without --tp");
  return check_tp_shape(o, world_size);
}

// --tp inside --pp's stages: a family whose tensor-parallel model builds a stage's part, then
// everything --tp asks alone (the pipeline's checks passed: the world is tp x pp x dp).
Status check_tp_in_stages(const TrainOptions& o, int world_size) {
  auto cfg = find_decoder_config(o.model);
  if (!cfg) return cfg.error();
  if (!has_tp_stage_model(cfg->family))
    return refuse(fmt::format("--tp {} with --pp {}: the {} family ({}) has no tensor-parallel "
                              "model of a pipeline stage",
                              o.tp, o.pp, cfg->family, o.model),
                  fmt::format("drop --tp (--pp {} alone splits {}'s blocks over stages, with data "
                              "parallelism over the other ranks), or pick a model of a family "
                              "with one: {}",
                              o.pp, o.model, tp_stage_families()));
  return check_tp_model(o, world_size);
}

}  // namespace

Status check_model_parallel_options(const TrainOptions& o, int world_size) {
  if (o.pp > 1) {
    if (auto st = check_pipeline_options(o, world_size); !st) return st;
    return o.tp > 1 ? check_tp_in_stages(o, world_size) : ok_status();
  }
  if (o.tp == 1) return ok_status();
  return check_tp_model(o, world_size);
}

Status check_tp_mesh_options(const TrainOptions& o, const std::string& shard, int world_size) {
  if (shard != "none")
    return refuse(fmt::format("--tp {} with --shard {}: the one-rank mesh (--tp 1, the TP path's "
                              "smoke test) runs over plain data parallelism",
                              o.tp, shard),
                  "drop --tp 1, or pass --tp 2 or more with --shard");
  return check_tp_model(o, world_size);
}

Status check_tp_placement(const TrainOptions& o, int ranks_per_node, int nnodes) {
  if (o.tp == 1) return ok_status();
  if (tp_inside_node(static_cast<int>(o.tp), ranks_per_node, nnodes) || o.allow_tp_across_nodes)
    return ok_status();
  const int fits = std::gcd(ranks_per_node, static_cast<int>(o.tp));
  return refuse(fmt::format("--tp {} spans nodes: {} ranks per node on {} nodes put a "
                            "tensor-parallel group (consecutive ranks) on more than one node, "
                            "and every layer all-reduces inside the group",
                            o.tp, ranks_per_node, nnodes),
                fmt::format("use --tp {} (it divides the {} ranks per node), or pass "
                            "--allow_tp_across_nodes",
                            fits, ranks_per_node));
}

}  // namespace gpulab::train::parallel
