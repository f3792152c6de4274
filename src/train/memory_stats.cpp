// Peak host memory from the kernel, device peaks from the CUDA caching allocator (memory_stats.h).
#include "train/memory_stats.h"

#include <sys/resource.h>

// Only a CUDA (or HIP) libtorch has the allocator's symbols; Debian's CPU libtorch ships the
// c10/cuda headers without them.
#if defined(GPULAB_WITH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace gpulab::train {

int64_t held_parameter_bytes(const torch::nn::Module& m) {
  int64_t bytes = 0;
  for (const auto& t : m.parameters())
    if (!t.is_meta()) bytes += t.numel() * static_cast<int64_t>(t.element_size());
  return bytes;
}

int64_t peak_host_memory_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

std::optional<DevicePeak> device_memory_peak(const torch::Device& device) {
#if defined(GPULAB_WITH_CUDA)
  if (device.is_cuda()) {
    const auto index = device.has_index() ? device.index() : c10::DeviceIndex{0};
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    constexpr size_t kAll = 0;  // StatType::AGGREGATE: small and large pools together
    return DevicePeak{stats.allocated_bytes[kAll].peak, stats.reserved_bytes[kAll].peak};
  }
#else
  (void)device;
#endif
  return std::nullopt;
}

void reset_device_memory_peak(const torch::Device& device) {
#if defined(GPULAB_WITH_CUDA)
  if (device.is_cuda())
    c10::cuda::CUDACachingAllocator::resetPeakStats(device.has_index() ? device.index()
                                                                       : c10::DeviceIndex{0});
#else
  (void)device;
#endif
}

}  // namespace gpulab::train
