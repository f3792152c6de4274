// Decode products against weights packed once per generation. A decode step multiplies a few
// dozen rows (the live rows of a batch) by every weight of the model, and the BLAS copies each
// weight into its panels on every call (MKL's sgemm_scopy: 13 % of a GRPO step on the CPU); the
// weights do not change while a batch is generated, so a PackedWeights set alive around the
// decode loop packs each weight once into panels of 16 output columns, and the products run a
// register-tiled kernel over the panels. Either weight layout packs the same way, so GPT-2's
// Conv1D [in, out] weights take it as Llama's [out, in] ones do.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <unordered_map>

namespace gpulab::train {

// Output columns per panel: two AVX2 registers of float32.
inline constexpr int64_t kPanelColumns = 16;
// Products of fewer rows keep small_rows_linear (a few chains of sums would wait on each other
// here); products of more keep the BLAS, whose blocking pays for its packing.
inline constexpr int64_t kPackedMinRows = 4;
inline constexpr int64_t kPackedMaxRows = 128;
// No set holds more than this many bytes of packed copies: the weights past it keep the BLAS.
inline constexpr int64_t kPackedBytesMax = int64_t{512} << 20;

// w as panels [ceil(N / 16), K, 16] float32, columns past N zero. `k_major`: w is [K, N]
// (GPT-2's Conv1D), else [N, K] (torch::nn::Linear's).
torch::Tensor pack_weight(const torch::Tensor& w, bool k_major);

// x @ W^T for W packed by pack_weight with `n` output columns: [..., n], float32, no autograd.
torch::Tensor packed_linear(const torch::Tensor& x, const torch::Tensor& packed, int64_t n);

// The packed copies of one generation's weights, made on first use. Constructing a set makes it
// the calling thread's current one until it is destroyed (sets nest). A weight changed in place
// since it was packed (its version counter moved) is packed again.
class PackedWeights {
 public:
  PackedWeights();
  ~PackedWeights();
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;

  // The packed copy of w, or nullptr where it would take the set past kPackedBytesMax.
  const torch::Tensor* find_or_pack(const torch::Tensor& w, bool k_major);
  int64_t bytes() const { return bytes_; }

 private:
  struct Entry {
    torch::Tensor source;  // held, so its address is not reused while the entry lives
    int64_t version = 0;
    torch::Tensor packed;
  };
  std::unordered_map<const void*, Entry> entries_;
  int64_t bytes_ = 0;
  PackedWeights* previous_ = nullptr;
};

// x @ w^T (x @ w for a `k_major` weight) through the calling thread's PackedWeights when one is
// current and the product is a decode step's: float32 CPU tensors, no gradient wanted, no
// autocast, kPackedMinRows..kPackedMaxRows rows, AVX2 + FMA, gpulab's CPU kernels on. Undefined
// where it does not apply (the caller takes its ordinary product).
torch::Tensor packed_decode_product(const torch::Tensor& x, const torch::Tensor& w, bool k_major);

}  // namespace gpulab::train
