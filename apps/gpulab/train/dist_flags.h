// The flag table of train::dist::DistOptions (the "Distributed" group of `gpulab train` and
// `gpulab bench train|allreduce`): the launch flags, then the ones a rank reads.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "train/dist/dist_options.h"

namespace gpulab::cli {

// training: every flag; otherwise (bench allreduce) the rendezvous flags, --backend and
// --dist_timeout. Values are checked by train::dist::validate, not here.
void add_dist_flags(CLI::App* cmd, train::dist::DistOptions& o, bool training = true);

// --shard, --shard_wrap, --shard_param_dtype and --shard_reduce_dtype alone (`gpulab plan`
// takes them; add_dist_flags includes them).
void add_shard_flags(CLI::App* cmd, train::dist::DistOptions& o,
                     const std::string& group = "Distributed");

}  // namespace gpulab::cli
