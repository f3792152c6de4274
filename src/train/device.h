// The one parser of --device and the one thread setup for train, bench, gpu-test and infer: "auto",
// "cpu", "cuda", "cuda:N" (and "gpu" / "hip" for "cuda", as ROCm users write it).
#pragma once

#include <torch/types.h>

#include <string>

#include "core/result.h"

namespace gpulab::train {

// Spelling only, no libtorch call: the launcher checks it before any rank starts.
bool valid_device_name(const std::string& name);

// A GPU name (cuda, cuda:N, gpu, hip) in a build without CUDA, or with no device visible: one
// error, exit 3 (the environment, not the flag). OK for cpu, auto and every name on a GPU host.
Status check_gpu_build(const std::string& name);

// The device for this process: "auto" is a GPU when libtorch sees one, else the CPU; "auto" and
// "cuda" take GPU local_rank % count. Throws kInvalidArgument for a bad name and kUnavailable for
// a GPU this libtorch does not see.
torch::Device resolve_device(const std::string& name, int local_rank = 0);

// Sets intra-op threads for this process and returns them: `requested`, else the launcher's share
// ($GPULAB_NUM_THREADS), else the cores this process may use (its affinity mask) split between
// the host's local ranks. libtorch reports 1 thread on some machines unless told.
int configure_threads(int requested = 0, int local_world_size = 1);

}  // namespace gpulab::train
