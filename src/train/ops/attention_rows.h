// Row kernels of the fused CPU attention (causal_attention.cpp) on float32 buffers: the softmax
// and its backward, the rotary embedding into and out of float32 or bfloat16 rows, row copies.
// AVX2 lanes where the CPU has them, the same arithmetic in scalar code otherwise.
#pragma once

#include <cstdint>
#include <type_traits>

namespace gpulab::train {

// Softmax of one row of n scores scaled by `scale`, in place (the row's maximum subtracted).
void softmax_row(float* p, int64_t n, float scale);

// The gradient of the scaled scores from that of the probabilities p, in place in dp:
// dp = p (dp - sum(dp p)) scale.
void softmax_backward_row(const float* p, float* dp, int64_t n, float scale);

// What the rotary kernels compute in for elements of type T: double for double (the numerics
// checks), float for float and c10::BFloat16.
template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Hugging Face's rotary layout, x * cos + rotate_half(x) * sin with rotate_half([a, b]) = [-b, a],
// for `rows` rows of d elements of x at stride ld (In: float, c10::BFloat16 or double) into out
// (rows x d, dense); cos and sin are rows x d floats.
template <typename In>
void rotate_rows(const In* x, int64_t ld, const float* cos, const float* sin, int64_t rows,
                 int64_t d, Wide<In>* out);

// The transpose of rotate_rows: the gradient of x from that of rot(x) (g, rows x d, dense) into
// rows of dx at stride ld (Out: float, c10::BFloat16, rounded once, or double).
template <typename Out>
void rotate_rows_back(const Wide<Out>* g, const float* cos, const float* sin, int64_t rows,
                      int64_t d, Out* dx, int64_t ld);

// rows x d elements at stride ld to and from a dense float buffer.
template <typename In>
void load_rows(const In* src, int64_t ld, int64_t rows, int64_t d, float* dst);
template <typename Out>
void store_rows(const float* src, int64_t rows, int64_t d, Out* dst, int64_t ld);

}  // namespace gpulab::train
