// Autocast and TF32 switches for --precision.
#include "train/precision.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "core/error.h"

namespace gpulab::train {

Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "tf32") return Precision::kTf32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") return Precision::kFp16;
  if (name == "fp64") return Precision::kFp64;
  throw Exception(Code::kInvalidArgument, "unknown precision '" + name + "'",
                  "valid values: fp32, tf32, bf16, fp16, fp64");
}

std::string configure_precision(Precision p, const torch::Device& device) {
  const bool tf32 = p == Precision::kTf32;
  if (device.is_cuda()) {
    // TF32 matmuls and convolutions on Ampere and newer; plain fp32 otherwise.
    at::globalContext().setAllowTF32CuBLAS(tf32);
    at::globalContext().setAllowTF32CuDNN(tf32);
    return {};
  }
  if (tf32) return "note: --precision tf32 has no effect on the CPU; training runs in fp32";
  if (p == Precision::kFp16)
    throw Exception(Code::kInvalidArgument, "--precision fp16 is not supported on the CPU",
                    "use --precision bf16 on the CPU");
  return {};
}

namespace {

// Autocast's switches are per device type (the CPU's and CUDA's are separate).
at::DeviceType autocast_device(bool cuda) {
  return cuda ? at::kCUDA : at::kCPU;
}
bool autocast_enabled(bool cuda) {
  return at::autocast::is_autocast_enabled(autocast_device(cuda));
}
at::ScalarType autocast_dtype(bool cuda) {
  return at::autocast::get_autocast_dtype(autocast_device(cuda));
}
void set_autocast(bool cuda, bool enabled, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(autocast_device(cuda), dtype);
  at::autocast::set_autocast_enabled(autocast_device(cuda), enabled);
}

}  // namespace

Precision active_autocast(const torch::Device& device) {
  const bool cuda = device.is_cuda();
  if (!autocast_enabled(cuda)) return Precision::kFp32;
  return autocast_dtype(cuda) == at::kBFloat16 ? Precision::kBf16 : Precision::kFp16;
}

AutocastGuard::AutocastGuard(Precision p, const torch::Device& device) {
  if (p != Precision::kBf16 && p != Precision::kFp16) return;
  active_ = true;
  cuda_ = device.is_cuda();
  prev_enabled_ = autocast_enabled(cuda_);
  prev_dtype_ = autocast_dtype(cuda_);
  set_autocast(cuda_, true, p == Precision::kBf16 ? at::kBFloat16 : at::kHalf);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cast cache lives as long as the outermost autocast region (as in torch.autocast).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, prev_enabled_, prev_dtype_);
}

}  // namespace gpulab::train
