// Fused causal self-attention for the CPU (see causal_attention.h): one task per (sequence,
// key/value head), each rotating its heads into small buffers and running the products and the
// softmax on blocks of query rows against the keys they may see, on libtorch's ops (float32 and
// float64). Its float32 path on oneDNN's sgemm went with Debian's oneDNN (ops/OpsDeps.cmake).
#include "train/ops/causal_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "train/ops/attention_rows.h"

namespace gpulab::train {
namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Query rows per block: a block's scores (rows x keys) stay in cache at the usual lengths, and a
// block of early rows only multiplies the keys it can see.
constexpr int64_t kRowBlock = 128;

struct AttentionShape {
  int64_t batch, length, dim, heads, kv_heads;
  int64_t group() const { return heads / kv_heads; }
  double scale() const { return 1.0 / std::sqrt(static_cast<double>(dim)); }
};

// Scores of query rows first..first+rows-1 against keys 0..first+rows-1, scaled and masked (key j
// hidden from query i when j > i), and their softmax.
Tensor block_probabilities(const Tensor& q_rot, const Tensor& k_rot, int64_t first, int64_t rows,
                           double scale) {
  const int64_t keys = first + rows;
  auto scores = at::mm(q_rot.narrow(0, first, rows), k_rot.narrow(0, 0, keys).t());
  scores.mul_(scale);
  AT_DISPATCH_FLOATING_TYPES(scores.scalar_type(), "causal_mask", [&] {
    auto* p = scores.data_ptr<scalar_t>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = first + r + 1; j < keys; ++j)
        p[r * keys + j] = -std::numeric_limits<scalar_t>::infinity();
  });
  return at::_softmax(scores, 1, false);
}

// Rows of head `head` of a B x T x (H * D) tensor for sequence b: T x D at stride H * D.
Tensor head_rows(const Tensor& x, int64_t b, int64_t head, int64_t dim) {
  return x.select(0, b).narrow(1, head * dim, dim);
}

template <typename T>
Tensor rotated(const Tensor& x, int64_t b, int64_t head, const AttentionShape& s, const Tensor& cos,
               const Tensor& sin) {
  auto rows = head_rows(x, b, head, s.dim);
  auto out = at::empty({s.length, s.dim}, x.options());
  rotate_rows(rows.data_ptr<T>(), rows.stride(0), cos.data_ptr<float>(), sin.data_ptr<float>(),
              s.length, s.dim, out.data_ptr<T>());
  return out;
}

template <typename T>
void forward_task(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                  const Tensor& sin, const AttentionShape& s, int64_t b, int64_t g, Tensor& out) {
  auto k_rot = rotated<T>(k, b, g, s, cos, sin);
  auto v_rows = head_rows(v, b, g, s.dim);
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
    auto q_rot = rotated<T>(q, b, h, s, cos, sin);
    auto o = head_rows(out, b, h, s.dim);
    for (int64_t first = 0; first < s.length; first += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, s.length - first);
      auto probs = block_probabilities(q_rot, k_rot, first, rows, s.scale());
      auto o_block = o.narrow(0, first, rows);
      at::mm_out(o_block, probs, v_rows.narrow(0, 0, first + rows));
    }
  }
}

template <typename T>
void backward_task(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                   const Tensor& sin, const Tensor& grad, const AttentionShape& s, int64_t b,
                   int64_t g, Tensor& dq, Tensor& dk, Tensor& dv) {
  auto k_rot = rotated<T>(k, b, g, s, cos, sin);
  auto v_rows = head_rows(v, b, g, s.dim);
  auto dk_rot = at::zeros({s.length, s.dim}, q.options());
  auto dv_rows = at::zeros({s.length, s.dim}, q.options());
  auto dq_rot = at::empty({s.length, s.dim}, q.options());
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
    auto q_rot = rotated<T>(q, b, h, s, cos, sin);
    auto go = head_rows(grad, b, h, s.dim);
    for (int64_t first = 0; first < s.length; first += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, s.length - first), keys = first + rows;
      auto probs = block_probabilities(q_rot, k_rot, first, rows, s.scale());
      auto go_block = go.narrow(0, first, rows);
      auto dv_block = dv_rows.narrow(0, 0, keys);
      dv_block.addmm_(probs.t(), go_block);
      auto dprobs = at::mm(go_block, v_rows.narrow(0, 0, keys).t());
      auto dscores = at::_softmax_backward_data(dprobs, probs, 1, probs.scalar_type());
      dscores.mul_(s.scale());
      auto dq_block = dq_rot.narrow(0, first, rows);
      at::mm_out(dq_block, dscores, k_rot.narrow(0, 0, keys));
      auto dk_block = dk_rot.narrow(0, 0, keys);
      dk_block.addmm_(dscores.t(), q_rot.narrow(0, first, rows));
    }
    auto dq_rows = head_rows(dq, b, h, s.dim);
    rotate_rows_back(dq_rot.data_ptr<T>(), cos.data_ptr<float>(), sin.data_ptr<float>(), s.length,
                     s.dim, dq_rows.data_ptr<T>(), dq_rows.stride(0));
  }
  auto dk_rows = head_rows(dk, b, g, s.dim);
  rotate_rows_back(dk_rot.data_ptr<T>(), cos.data_ptr<float>(), sin.data_ptr<float>(), s.length,
                   s.dim, dk_rows.data_ptr<T>(), dk_rows.stride(0));
  head_rows(dv, b, g, s.dim).copy_(dv_rows);
}

// One task per (sequence, key/value head): a task owns its heads' output rows and its key and
// value gradients, so no two tasks write the same memory and the result does not depend on the
// thread count. Products inside a task run single-threaded (ATen and BLAS inside a parallel
// region: this file is compiled with OpenMP where libtorch uses it, see ops/OpsDeps.cmake).
template <typename F>
void for_each_task(const AttentionShape& s, F&& fn) {
  at::parallel_for(0, s.batch * s.kv_heads, 1, [&](int64_t begin, int64_t end) {
    // Worker threads start with autograd on (its mode is per thread): these products are not
    // to be recorded.
    torch::NoGradGuard no_grad;
    for (int64_t t = begin; t < end; ++t) fn(t / s.kv_heads, t % s.kv_heads);
  });
}

// Every task, on libtorch's ops in q's element type (float32 or float64): on_ops(tag, b, g),
// tag a value of that type.
template <typename Ops>
void run_tasks(const Tensor& q, const AttentionShape& s, const Ops& on_ops) {
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "fused_causal_attention", [&] {
    for_each_task(s, [&](int64_t b, int64_t g) { on_ops(scalar_t{}, b, g); });
  });
}

struct CausalAttention : torch::autograd::Function<CausalAttention> {
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& cos, const Tensor& sin, int64_t heads, int64_t kv_heads) {
    ctx->save_for_backward({q, k, v, cos, sin});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["kv_heads"] = kv_heads;
    const AttentionShape s{q.size(0), q.size(1), q.size(2) / heads, heads, kv_heads};
    auto out = at::empty_like(q);
    run_tasks(q, s, [&](auto tag, int64_t b, int64_t g) {
      using T = decltype(tag);
      forward_task<T>(q, k, v, cos, sin, s, b, g, out);
    });
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &cos = saved[3], &sin = saved[4];
    const int64_t heads = ctx->saved_data["heads"].toInt();
    const AttentionShape s{q.size(0), q.size(1), q.size(2) / heads, heads,
                           ctx->saved_data["kv_heads"].toInt()};
    auto grad = grads[0].to(q.scalar_type()).contiguous();
    auto dq = at::empty_like(q), dk = at::empty_like(k), dv = at::empty_like(v);
    run_tasks(q, s, [&](auto tag, int64_t b, int64_t g) {
      using T = decltype(tag);
      backward_task<T>(q, k, v, cos, sin, grad, s, b, g, dq, dk, dv);
    });
    return {dq, dk, dv, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

bool fused_causal_attention_applies(const torch::Tensor& q) {
  const auto t = q.scalar_type();
  return q.device().is_cpu() && (t == torch::kFloat || t == torch::kDouble);
}

torch::Tensor fused_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const torch::Tensor& cos,
                                     const torch::Tensor& sin, int64_t heads, int64_t kv_heads) {
  TORCH_CHECK(q.dim() == 3 && k.sizes() == v.sizes() && q.size(0) == k.size(0) &&
                  q.size(1) == k.size(1) && heads % kv_heads == 0 && q.size(2) % heads == 0 &&
                  k.size(2) == q.size(2) / heads * kv_heads,
              "fused_causal_attention: q, k, v shapes do not match the heads");
  const int64_t dim = q.size(2) / heads;
  TORCH_CHECK(
      dim % 2 == 0 && cos.sizes() == sin.sizes() && cos.size(0) == q.size(1) && cos.size(1) == dim,
      "fused_causal_attention: rotary tables must be T x D with D even");
  auto f32 = [](const Tensor& t) { return t.to(torch::kFloat).contiguous(); };
  return CausalAttention::apply(q.contiguous(), k.to(q.scalar_type()).contiguous(),
                                v.to(q.scalar_type()).contiguous(), f32(cos), f32(sin), heads,
                                kv_heads);
}

}  // namespace gpulab::train
