// --device names to libtorch devices, and intra-op threads; see device.h.
#include "train/device.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/strings.h"
#include "launch/launcher.h"
#include "launch/rank_env.h"

namespace gpulab::train {
namespace {

struct DeviceName {
  bool is_auto = false, cpu = false;
  std::optional<int> index;  // cuda:N
};

std::optional<DeviceName> parse_name(const std::string& spec) {
  const std::string s = to_lower(trim(spec));
  DeviceName d;
  if (s.empty() || s == "auto") {
    d.is_auto = true;
    return d;
  }
  if (s == "cpu") {
    d.cpu = true;
    return d;
  }
  for (const char* gpu : {"cuda", "gpu", "hip"}) {
    const std::string g = gpu;
    if (s == g) return d;
    if (!starts_with(s, g + ":") || s.size() == g.size() + 1 || s.size() > g.size() + 6) continue;
    if (!std::all_of(s.begin() + static_cast<std::ptrdiff_t>(g.size() + 1), s.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      return std::nullopt;
    d.index = std::stoi(s.substr(g.size() + 1));
    return d;
  }
  return std::nullopt;
}

}  // namespace

bool valid_device_name(const std::string& name) {
  return parse_name(name).has_value();
}

Status check_gpu_build(const std::string& name) {
  const auto d = parse_name(name);
  if (!d || d->cpu || d->is_auto) return ok_status();
#if !defined(GPULAB_WITH_CUDA)
  return Error{Code::kUnavailable,
               "this build's libtorch has no CUDA: gpulab was built against a CPU-only "
               "libtorch " TORCH_VERSION ", so device '" +
                   name + "' cannot be used",
               "run with --device cpu, or build gpulab on the GPU host against PyTorch's CUDA "
               "or ROCm libtorch (docs/gpu.md)"};
#else
  if (!torch::cuda::is_available())
    return Error{Code::kUnavailable,
                 "--device " + name + " asked for, but this libtorch sees no CUDA/ROCm device",
                 "check the driver (nvidia-smi, rocm-smi) and CUDA_VISIBLE_DEVICES, or use "
                 "--device cpu"};
  return ok_status();
#endif
}

torch::Device resolve_device(const std::string& name, int local_rank) {
  const auto d = parse_name(name);
  if (!d)
    throw Exception(Code::kInvalidArgument, "invalid device '" + name + "'",
                    "use auto, cpu, cuda or cuda:N");
  const int count = torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (d->cpu || (d->is_auto && count == 0)) return torch::kCPU;
  if (auto st = check_gpu_build(name); !st) throw Exception(st.error());
  const int index = d->index.value_or(count > 0 ? local_rank % count : 0);
  if (index >= count)
    throw Exception(Code::kUnavailable,
                    "device '" + name + "' is not available: this libtorch sees " +
                        std::to_string(count) + " GPU(s)",
                    count == 0 ? "run with --device cpu, or use a CUDA/ROCm build of gpulab "
                                 "on a GPU host (see `gpulab detect`)"
                               : "choose cuda:0 .. cuda:" + std::to_string(count - 1));
  return {torch::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

int configure_threads(int requested, int local_world_size) {
  int n = requested;
  if (n <= 0) {
    const char* share = std::getenv(launch::kEnvNumThreads);
    n = share ? std::atoi(share) : 0;
    // A mask narrower than the machine was set per task (srun's CPU binding): it is this
    // rank's share already. Otherwise the host's cores are split between its local ranks.
    const int mine = launch::available_cores();
    const bool bound = mine < static_cast<int>(std::thread::hardware_concurrency());
    if (n <= 0) n = bound ? mine : std::max(1, mine / std::max(1, local_world_size));
  }
  at::set_num_threads(n);
  return n;
}

}  // namespace gpulab::train
