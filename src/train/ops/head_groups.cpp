// The grouped-query layout of the batched attention and its rotary pass (see head_groups.h).
#include "train/ops/head_groups.h"

#include <algorithm>

#include "train/ops/attention_rows.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {
namespace {

using torch::Tensor;

struct GroupShape {
  int64_t b, t, groups, rep, d;
  int64_t table_stride;  // floats between two sequences' rotary tables: 0 where they share one

  int64_t heads() const { return groups * rep; }
  // Where head h of position t of sequence b lies in the grouped layout (elements).
  int64_t grouped(int64_t seq, int64_t pos, int64_t h) const {
    return (((seq * groups + h / rep) * t + pos) * rep + h % rep) * d;
  }
  // ... and in the projections' layout.
  int64_t projected(int64_t seq, int64_t pos, int64_t h) const {
    return ((seq * t + pos) * heads() + h) * d;
  }
  int64_t table(int64_t seq, int64_t pos) const { return seq * table_stride + pos * d; }
};

GroupShape group_shape(int64_t b, int64_t t, int64_t groups, int64_t rep, int64_t d,
                       const Tensor& cos) {
  const bool per_sequence = cos.dim() == 4 && cos.size(0) > 1;
  return {b, t, groups, rep, d, per_sequence ? t * d : 0};
}

// fn(sequence, position) for every position, split between threads in whole ranges (each
// position's rows are its own: the result does not depend on the split).
template <typename F>
void for_positions(const GroupShape& s, const F& fn) {
  const int64_t all = s.b * s.t;
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), all / 16));
  const int64_t per = (all + chunks - 1) / chunks;
  parallel_chunks(chunks, [&](int64_t c) {
    for (int64_t i = c * per; i < std::min(all, (c + 1) * per); ++i) fn(i / s.t, i % s.t);
  });
}

// Every head row of every position through the rotation into the grouped layout (kInto), or
// from it through the rotation's transpose.
template <typename T, bool kInto>
void rotate_heads(const Tensor& x, const Tensor& cos, const Tensor& sin, const GroupShape& s,
                  Tensor& out) {
  const T* src = x.data_ptr<T>();
  T* dst = out.data_ptr<T>();
  const float *c = cos.data_ptr<float>(), *sn = sin.data_ptr<float>();
  for_positions(s, [&](int64_t b, int64_t t) {
    const int64_t table = s.table(b, t);
    for (int64_t h = 0; h < s.heads(); ++h) {
      if constexpr (kInto)
        rotate_rows(src + s.projected(b, t, h), s.d, c + table, sn + table, 1, s.d,
                    dst + s.grouped(b, t, h));
      else
        rotate_rows_back(src + s.grouped(b, t, h), c + table, sn + table, 1, s.d,
                         dst + s.projected(b, t, h), s.d);
    }
  });
}

// x through rotate_heads into a new tensor of `sizes`.
template <bool kInto>
Tensor rotated_copy(const Tensor& x, const Tensor& cos, const Tensor& sin, const GroupShape& s,
                    at::IntArrayRef sizes) {
  TORCH_CHECK(rotary_tables_fit(cos, sin, s.b, s.t, s.d) && s.d % 2 == 0,
              "head groups: cos and sin must be float32 rotary tables of ", s.t, " x ", s.d);
  const auto dense = x.contiguous();
  auto out = at::empty(sizes, x.options());
  const auto c = cos.contiguous(), sn = sin.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, x.scalar_type(), "head_groups",
                                 [&] { rotate_heads<scalar_t, kInto>(dense, c, sn, s, out); });
  return out;
}

}  // namespace

bool rotary_tables_fit(const Tensor& cos, const Tensor& sin, int64_t b, int64_t t, int64_t d) {
  if (!cos.defined() || !sin.defined() || cos.sizes() != sin.sizes()) return false;
  if (cos.scalar_type() != torch::kFloat || sin.scalar_type() != torch::kFloat) return false;
  if (cos.dim() == 2) return cos.size(0) == t && cos.size(1) == d;
  return cos.dim() == 4 && (cos.size(0) == 1 || cos.size(0) == b) && cos.size(1) == 1 &&
         cos.size(2) == t && cos.size(3) == d;
}

Tensor to_head_groups(const Tensor& x, int64_t groups, int64_t d, const Tensor& cos,
                      const Tensor& sin) {
  TORCH_CHECK(x.dim() == 3 && groups > 0 && d > 0 && x.size(2) % (groups * d) == 0,
              "to_head_groups: x must be B x T x groups*rep*d");
  const int64_t b = x.size(0), t = x.size(1), rep = x.size(2) / (groups * d);
  if (!cos.defined())
    return x.reshape({b, t, groups, rep, d})
        .permute({0, 2, 1, 3, 4})
        .reshape({b * groups, t * rep, d});
  return rotated_copy<true>(x, cos, sin, group_shape(b, t, groups, rep, d, cos),
                            {b * groups, t * rep, d});
}

Tensor from_head_groups(const Tensor& x, int64_t b, int64_t t, const Tensor& cos,
                        const Tensor& sin) {
  TORCH_CHECK(x.dim() == 3 && b > 0 && t > 0 && x.size(0) % b == 0 && x.size(1) % t == 0,
              "from_head_groups: x must be b*groups x t*rep x d");
  const int64_t groups = x.size(0) / b, rep = x.size(1) / t, d = x.size(2);
  if (!cos.defined())
    return x.reshape({b, groups, t, rep, d})
        .permute({0, 2, 1, 3, 4})
        .reshape({b, t, groups * rep * d});
  return rotated_copy<false>(x, cos, sin, group_shape(b, t, groups, rep, d, cos),
                             {b, t, groups * rep * d});
}

}  // namespace gpulab::train
