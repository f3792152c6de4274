// Device description and --device parsing for CPU and CUDA/HIP builds of libtorch.
#include "train/device_info.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/strings.h"

#if defined(GPULAB_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#endif

namespace gpulab::train {

Json DeviceInfo::to_json() const {
  return Json{{"device", device},
              {"name", name},
              {"total_memory_bytes", total_memory_bytes},
              {"multiprocessor_count", multiprocessor_count},
              {"compute_capability", compute_capability}};
}

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (starts_with(line, "model name")) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return trim(line.substr(colon + 1));
    }
  }
  return "CPU";
}

int64_t host_memory_bytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : 0;
}

}  // namespace

DeviceInfo describe_device(const torch::Device& device) {
  DeviceInfo info;
  info.device = device.str();
  if (device.is_cpu()) {
    info.name = cpu_model_name();
    info.total_memory_bytes = host_memory_bytes();
    info.multiprocessor_count = static_cast<int64_t>(std::thread::hardware_concurrency());
    return info;
  }
#if defined(GPULAB_WITH_CUDA)
  const auto* prop = at::cuda::getDeviceProperties(device.index());
  info.name = prop->name;
  info.total_memory_bytes = static_cast<int64_t>(prop->totalGlobalMem);
  info.multiprocessor_count = prop->multiProcessorCount;
  info.compute_capability = std::to_string(prop->major) + "." + std::to_string(prop->minor);
#else
  info.name = "GPU " + std::to_string(device.index());
#endif
  return info;
}

}  // namespace gpulab::train
