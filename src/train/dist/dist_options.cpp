// Validation of the DDP options, and the distributed context built from them and the environment.
#include "train/dist/dist_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/flag_checks.h"
#include "core/strings.h"
#include "launch/ports.h"
#include "launch/rank_env.h"
#include "train/dist/ddp_context.h"
#include "train/dist/shard_context.h"
#include "train/dist/shard_precision.h"
#include "train/dist/sharded_model.h"
#include "train/dist/wrap_policy.h"
#include "train/parallel/pipeline_context.h"
#include "train/parallel/pipeline_shard_context.h"
#include "train/parallel/tp_context.h"
#include "train/parallel/tp_pipeline_context.h"
#include "train/parallel/tp_pipeline_shard_context.h"
#include "train/parallel/tp_shard_context.h"

namespace gpulab::train::dist {

namespace {
// --shard with bf16 parameter copies under a model-parallel flag (`what`: "--tp 2").
Status refuse_bf16_copies(const DistOptions& o, const std::string& what, const std::string& why) {
  return Error{Code::kInvalidArgument,
               fmt::format("{} with --shard {} and bf16 parameter copies (--shard_param_dtype {}, "
                           "--precision {}): {}",
                           what, o.shard, o.shard_param_dtype, o.precision, why),
               "pass --shard_param_dtype fp32 (bf16 autocast still runs the products), or "
               "--shard none"};
}

}  // namespace

Status validate(const DistOptions& o) {
  for (const Status& s :
       {launch::validate(o.launch), flag_one_of("backend", o.backend, {"auto", "nccl", "gloo"}),
        flag_in_range("dist_timeout", o.timeout_s, 1.0, 86400.0),
        flag_in_range("bucket_cap_mb", o.bucket_cap_mb, 0.001, 4096.0),
        flag_one_of("shard", o.shard, shard_stage_names()),
        flag_one_of("shard_wrap", o.shard_wrap, wrap_policy_names()),
        flag_one_of("grad_compression", o.grad_compression, {"none", "fp16", "bf16"}),
        check_shard_dtypes(o.precision, o.shard_param_dtype, o.shard_reduce_dtype)})
    if (!s) return s;
  // Model-parallel runs checkpoint and cross stages from the parameters: bf16 compute copies
  // would lose the fp32 masters' bits (tp_shard_checkpoint.h, pipeline_shard_context.h).
  const bool bf16_copies =
      o.shard != "none" &&
      resolve_shard_dtypes(o.precision, o.shard_param_dtype, o.shard_reduce_dtype).param ==
          torch::kBFloat16;
  if (bf16_copies && o.tp > 1)
    return refuse_bf16_copies(o, fmt::format("--tp {}", o.tp),
                              "tensor-parallel checkpoints are not written from bf16 copies yet");
  if (bf16_copies && o.pp > 1)
    return refuse_bf16_copies(o, fmt::format("--pp {}", o.pp),
                              "pipeline stages train on the master dtype");
  return ok_status();
}

bool restarted() {
  auto place = launch::detect_rank_place(launch::process_env());
  return place.ok() && place->restart_count > 0;
}

namespace {

DdpOptions ddp_options(const DistOptions& o) {
  DdpOptions d;
  d.comm.backend = o.backend;
  d.comm.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  d.reducer.bucket_cap_mb = o.bucket_cap_mb;
  d.reducer.first_bucket_mb = o.first_bucket_mb;
  d.reducer.compression = o.grad_compression;
  d.sync_bn = o.sync_bn;
  return d;
}

ShardContextOptions shard_options(const DistOptions& o) {
  ShardContextOptions so;
  so.ddp = ddp_options(o);
  so.shard.stage = parse_shard_stage(o.shard);
  so.shard.wrap = o.shard_wrap;
  so.shard.reshard_after_forward = !o.shard_keep_after_forward;
  const auto dtypes = resolve_shard_dtypes(o.precision, o.shard_param_dtype, o.shard_reduce_dtype);
  so.shard.param_dtype = dtypes.param;
  so.shard.reduce_dtype = dtypes.reduce;
  return so;
}

// One process that still runs every collective and hook: a world of one on a free local port.
void solo_world(launch::RankPlace& place, CommOptions& comm) {
  place.master_addr = "127.0.0.1";
  place.master_port = launch::pick_free_port().value_or_throw();
  comm.print_auto = false;
}

}  // namespace

DistContextPtr make_dist_context(const DistOptions& o, std::shared_ptr<Communicator> group) {
  auto place = launch::detect_rank_place(launch::process_env()).value_or_throw();
  DistContextPtr ctx;
  if (o.pp > 1 && (o.tp > 1 || o.tp_mesh) && o.shard != "none") {
    // ZeRO over the data-parallel group of a TP x PP mesh.
    ctx = std::make_shared<parallel::TpPipelineShardContext>(place, shard_options(o), o.tp, o.pp);
  } else if (o.pp > 1 && (o.tp > 1 || o.tp_mesh)) {
    // Tensor-parallel groups inside pipeline stages (--tp 1: groups of one); the checks refused
    // a world that tp x pp does not divide before any rank started.
    ctx = std::make_shared<parallel::TpPipelineContext>(place, ddp_options(o), o.tp, o.pp);
  } else if (o.tp > 1 && o.shard != "none") {
    // ZeRO over the mesh's data-parallel group.
    ctx = std::make_shared<parallel::TpShardContext>(place, shard_options(o), o.tp);
  } else if (o.tp > 1 || o.tp_mesh) {
    // check_tp_options refused a world that tp does not divide before any rank started.
    DdpOptions d = ddp_options(o);
    if (!place.distributed()) solo_world(place, d.comm);
    ctx = std::make_shared<parallel::TpContext>(place, d, o.tp);
  } else if (o.pp > 1 && o.shard != "none") {
    // ZeRO over the data-parallel group of each pipeline stage.
    ctx = std::make_shared<parallel::PipelineShardContext>(place, shard_options(o), o.pp);
  } else if (o.pp > 1) {
    // check_pipeline_options refused a world that pp does not divide before any rank started.
    ctx = std::make_shared<parallel::PipelineContext>(place, ddp_options(o), o.pp);
  } else if (group && o.shard != "none") {
    ctx = std::make_shared<ShardContext>(std::move(group), place, shard_options(o));
  } else if (group) {
    ctx = std::make_shared<DdpContext>(std::move(group), place, ddp_options(o));
  } else if (o.shard != "none") {
    ShardContextOptions so = shard_options(o);
    if (!place.distributed()) solo_world(place, so.ddp.comm);
    ctx = std::make_shared<ShardContext>(place, so);
  } else if (!place.distributed() && o.backend != "nccl" && o.backend != "gloo") {
    ctx = single_process_context();
    ctx->local_rank = place.local_rank;
  } else {
    // A backend named on one process is a DDP world of one, as torchrun's --nproc_per_node 1
    // is: every collective and hook runs (make gpu-check's NCCL row runs NCCL, not a bare step).
    DdpOptions d = ddp_options(o);
    if (!place.distributed()) solo_world(place, d.comm);
    ctx = std::make_shared<DdpContext>(place, d);
  }
  if (o.say_hello) {
    std::printf("Hello from local_rank %d, global_rank %d\n", place.local_rank, place.rank);
    std::fflush(stdout);
  }
  return ctx;
}

}  // namespace gpulab::train::dist
