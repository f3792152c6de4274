// The one explicit list of GPU backends, in order of preference within each vendor: the vendor
// library first (richest, live metrics), then the kernel's files, then the smi command line.
#include "gpu/backend.h"

namespace gpulab::gpu {

std::vector<std::unique_ptr<GpuBackend>> make_backends() {
  std::vector<std::unique_ptr<GpuBackend>> list;
  list.push_back(make_nvml_backend());
  list.push_back(make_rocm_smi_backend());
  list.push_back(make_amdgpu_sysfs_backend());
  list.push_back(make_nvidia_procfs_backend());
  list.push_back(make_nvidia_smi_cli_backend());
  list.push_back(make_rocm_smi_cli_backend());
  return list;
}

}  // namespace gpulab::gpu
