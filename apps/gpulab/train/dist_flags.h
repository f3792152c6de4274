// The flag table of train::dist::DistOptions (the "Distributed" group of `gpulab train` and
// `gpulab bench train|allreduce`): the launch flags, then the ones a rank reads.
#pragma once

#include <CLI/CLI.hpp>

#include "train/dist/dist_options.h"

namespace gpulab::cli {

// training: every flag; otherwise (bench allreduce) the rendezvous flags, --backend and
// --dist_timeout. Values are checked by train::dist::validate, not here.
void add_dist_flags(CLI::App* cmd, train::dist::DistOptions& o, bool training = true);

}  // namespace gpulab::cli
