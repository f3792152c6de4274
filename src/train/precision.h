// --precision: fp32 | tf32 | bf16 | fp16 | fp64 mapped onto libtorch's autocast and TF32 switches,
// with an RAII guard that turns autocast on for the forward pass only.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

namespace gpulab::train {

// kFp64 trains in float64 throughout: a numerics check (DDP equivalence), not a speed mode.
enum class Precision { kFp32, kTf32, kBf16, kFp16, kFp64 };

Precision parse_precision(const std::string& name);

// Applies process-wide settings for `p` on `device` (TF32 on CUDA). Returns a note for the
// user when a setting does nothing here (tf32 on the CPU), else an empty string.
std::string configure_precision(Precision p, const torch::Device& device);

// True when `p` needs a dynamic loss scaler (fp16).
inline bool needs_loss_scaler(Precision p) {
  return p == Precision::kFp16;
}

// The autocast precision in force on the device's type now (kFp32 when off): activation
// checkpointing recomputes a block under the precision its forward pass ran in.
Precision active_autocast(const torch::Device& device);

// Enables autocast to bf16/fp16 on the device's type for its lifetime (no-op for fp32/tf32).
class AutocastGuard {
 public:
  AutocastGuard(Precision p, const torch::Device& device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  bool cuda_ = false;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::kFloat;
};

}  // namespace gpulab::train
