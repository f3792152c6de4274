// The peak a training run's TFLOPS are divided by for MFU: vendors' dense peaks per device and
// dtype (H100, H200, A100, MI300X, MI325X), and on the CPU the GEMM rate measured on the spot.
#pragma once

#include <torch/torch.h>

#include <string>

namespace gpulab::train {

struct PeakFlops {
  double flops = 0;    // per second, per device; 0 when unknown
  std::string source;  // "H100 SXM bf16 dense (datasheet)", "measured 1024^3 bf16 GEMM", ...
};

// A datasheet peak for a device named `device_name` (as the driver reports it) in `dtype`
// (bf16, fp16, fp32, tf32); flops 0 when the table has no row for it.
PeakFlops datasheet_peak(const std::string& device_name, const std::string& dtype);

// The peak for this run: the datasheet's for a GPU, else a short GEMM measured on this CPU
// (bf16 through oneDNN under bf16 autocast, else float32), taking about a quarter second.
PeakFlops peak_flops(const torch::Device& device, bool bf16);

}  // namespace gpulab::train
