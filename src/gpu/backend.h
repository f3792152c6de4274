// The vendor table: one interface every GPU backend implements (as nvtop's gpu_vendor), the
// factories of the backends, and the one explicit list detect() walks.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/inventory.h"

namespace gpulab::gpu {

// A link as a backend sees it, by PCI bus id; detect() turns bus ids into GPU indexes.
struct PciLink {
  std::string a_pci;
  std::string b_pci;
  std::string type;
  std::optional<int> lanes;
  std::optional<int> hops;
  std::optional<int> weight;
};

class GpuBackend {
 public:
  virtual ~GpuBackend() = default;
  virtual std::string_view name() const = 0;
  virtual Vendor vendor() const = 0;
  // A backend that starts a process is consulted only when no earlier backend of its vendor
  // found a device; reading files is cheap, so file backends also enrich earlier answers.
  virtual bool expensive(const DetectOptions& opts) const { return false; }
  // Loads the library or finds the files. False: the backend drops out, last_error() says why.
  virtual bool init(const DetectOptions& opts) = 0;
  virtual int device_count() const = 0;
  // What does not change: name, ids, memory total, cc/gfx target, partitions, driver.
  virtual GpuInfo static_info(int i) const = 0;
  // What does: memory used, utilization, temperature, power.
  virtual void sample(int i, GpuInfo& info) const = 0;
  virtual std::vector<GpuProcess> processes(int i) const { return {}; }
  virtual std::vector<PciLink> links() const { return {}; }
  // Driver-wide facts a backend may know (CUDA version of the driver).
  virtual std::optional<std::string> cuda_version() const { return std::nullopt; }
  const std::string& last_error() const { return error_; }

 protected:
  bool fail(std::string why) {
    error_ = std::move(why);
    return false;
  }
  std::string error_;
};

std::unique_ptr<GpuBackend> make_nvml_backend();
std::unique_ptr<GpuBackend> make_rocm_smi_backend();
std::unique_ptr<GpuBackend> make_amdgpu_sysfs_backend();
std::unique_ptr<GpuBackend> make_nvidia_procfs_backend();
std::unique_ptr<GpuBackend> make_nvidia_smi_cli_backend();
std::unique_ptr<GpuBackend> make_rocm_smi_cli_backend();

// In order of preference per vendor: libraries, then kernel files, then the smi tools.
std::vector<std::unique_ptr<GpuBackend>> make_backends();

}  // namespace gpulab::gpu
