// Device description and --device parsing for CPU and CUDA/HIP builds of libtorch.
#include "bench/device_info.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/strings.h"

#if defined(GPULAB_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#endif

namespace gpulab::bench {

Json DeviceInfo::to_json() const {
  return Json{{"device", device},
              {"name", name},
              {"total_memory_bytes", total_memory_bytes},
              {"multiprocessor_count", multiprocessor_count},
              {"compute_capability", compute_capability}};
}

torch::Device parse_device(const std::string& spec) {
  std::string s = to_lower(trim(spec));
  if (s.empty() || s == "auto") {
    return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0)
                                       : torch::Device(torch::kCPU);
  }
  if (s == "cpu") return torch::Device(torch::kCPU);
  if (starts_with(s, "cuda") || starts_with(s, "gpu") || starts_with(s, "hip")) {
    int index = 0;
    size_t colon = s.find(':');
    if (colon != std::string::npos) {
      try {
        size_t used = 0;
        index = std::stoi(s.substr(colon + 1), &used);
        if (used != s.size() - colon - 1 || index < 0) throw std::invalid_argument(s);
      } catch (const std::exception&) {
        throw Exception(Code::kInvalidArgument, "invalid device '" + spec + "'",
                        "use cpu, cuda or cuda:N");
      }
    }
    int64_t count =
        torch::cuda::is_available() ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
    if (index >= count) {
      throw Exception(Code::kUnavailable,
                      "device '" + spec + "' is not available: this libtorch sees " +
                          std::to_string(count) + " GPU(s)",
                      count == 0 ? "run with --device cpu, or use a CUDA/ROCm build of gpulab "
                                   "on a GPU host (see `gpulab detect`)"
                                 : "choose cuda:0 .. cuda:" + std::to_string(count - 1));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  throw Exception(Code::kInvalidArgument, "invalid device '" + spec + "'",
                  "use auto, cpu, cuda or cuda:N");
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

int configure_cpu_threads() {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (const char* env = std::getenv("GPULAB_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) threads = n;
  }
  if (threads < 1) threads = 1;
  at::set_num_threads(threads);
  return threads;
}

}  // namespace gpulab::bench
