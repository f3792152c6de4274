// Rotary kernels of gpulab's CPU attention (causal_attention.cpp, head_groups.cpp): the rotary
// embedding of rows of float32, bfloat16 or float64 and its transpose. AVX2 lanes (float32
// arithmetic) where the CPU has them, the same arithmetic in scalar code otherwise.
#pragma once

#include <cstdint>
#include <type_traits>

namespace gpulab::train {

// What the rotary kernels compute in for elements of type T: double for double (the numerics
// checks), float for float.
template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Hugging Face's rotary layout, x * cos + rotate_half(x) * sin with rotate_half([a, b]) = [-b, a],
// for `rows` rows of d elements of x at stride ld into out (rows x d, dense), computed in Wide<In>
// and rounded once to Out; cos and sin are rows x d floats. In and Out: float and float (or
// Wide<In>), double and double, bfloat16 and bfloat16.
template <typename In, typename Out>
void rotate_rows(const In* x, int64_t ld, const float* cos, const float* sin, int64_t rows,
                 int64_t d, Out* out);

// The transpose of rotate_rows: the gradient of x from that of rot(x) (g, rows x d, dense) into
// rows of dx at stride ld, computed in Wide<Out> (G: Out or Wide<Out>).
template <typename G, typename Out>
void rotate_rows_back(const G* g, const float* cos, const float* sin, int64_t rows, int64_t d,
                      Out* dx, int64_t ld);

}  // namespace gpulab::train
