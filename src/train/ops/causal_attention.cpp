// Fused causal self-attention for the CPU (see causal_attention.h): one task per (sequence,
// key/value head), each rotating its heads into small buffers and running the products and the
// softmax on blocks of query rows against the keys they may see. float32 and bfloat16 run in
// float32 buffers on oneDNN's sgemm and the row kernels of attention_rows.h (no tensors inside a
// task); float64 (the numerics checks) on libtorch's ops.
#include "train/ops/causal_attention.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "train/ops/attention_rows.h"
#include "train/ops/avx2_lanes.h"
#include "train/ops/sgemm.h"

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

// ---- float32 and bfloat16 on sgemm: each task works in float32 buffers of rows of D (dense
// unless an `ld` says otherwise); bfloat16 is converted on the way in and rounded once on the
// way out.

// Probabilities of query rows first..first+rows-1 (block `rows` x `keys`, leading dimension keys)
// against keys 0..first+rows-1; keys a query may not see get probability 0.
void block_probabilities(const float* q_rot, const float* k_rot, int64_t first, int64_t rows,
                         int64_t d, float scale, float* probs) {
  const int64_t keys = first + rows;
  sgemm('N', 'T', rows, keys, d, q_rot + first * d, d, k_rot, d, false, probs, keys);
  for (int64_t r = 0; r < rows; ++r) {
    float* p = probs + r * keys;
    softmax_row(p, first + r + 1, scale);
    std::fill(p + first + r + 1, p + keys, 0.0f);
  }
}

// A task's float buffer number `slot`, at least n long, kept per thread between calls: tasks run
// on libtorch's long-lived threads, so the hot path neither allocates (large blocks would be
// mapped and faulted in afresh each time) nor zero-fills what it overwrites anyway.
float* scratch(size_t slot, int64_t n) {
  thread_local std::array<std::vector<float>, 9> buffers;
  auto& b = buffers.at(slot);
  if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
  return b.data();
}

// Row 0 of head `head` of sequence b in a B x T x (H * D) tensor (rows at stride H * D).
template <typename In>
In* head_start(const Tensor& x, int64_t b, int64_t head, int64_t dim) {
  return x.data_ptr<In>() + b * x.stride(0) + head * dim;
}

template <typename In>
void forward_task_sgemm(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                        const Tensor& sin, const AttentionShape& s, int64_t b, int64_t g,
                        Tensor& out) {
  const int64_t d = s.dim, t = s.length;
  const float scale = static_cast<float>(s.scale());
  const float *c = cos.data_ptr<float>(), *sn = sin.data_ptr<float>();
  float *k_rot = scratch(0, t * d), *q_rot = scratch(1, t * d), *v_rows = scratch(2, t * d);
  float *o = scratch(3, t * d), *probs = scratch(4, kRowBlock * t);
  rotate_rows(head_start<In>(k, b, g, d), k.stride(1), c, sn, t, d, k_rot);
  load_rows(head_start<In>(v, b, g, d), v.stride(1), t, d, v_rows);
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
    rotate_rows(head_start<In>(q, b, h, d), q.stride(1), c, sn, t, d, q_rot);
    for (int64_t first = 0; first < t; first += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, t - first), keys = first + rows;
      block_probabilities(q_rot, k_rot, first, rows, d, scale, probs);
      sgemm('N', 'N', rows, d, keys, probs, keys, v_rows, d, false, o + first * d, d);
    }
    store_rows(o, t, d, head_start<In>(out, b, h, d), out.stride(1));
  }
}

template <typename In>
void backward_task_sgemm(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cos,
                         const Tensor& sin, const Tensor& grad, const AttentionShape& s, int64_t b,
                         int64_t g, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t d = s.dim, t = s.length;
  const float scale = static_cast<float>(s.scale());
  const float *c = cos.data_ptr<float>(), *sn = sin.data_ptr<float>();
  float *k_rot = scratch(0, t * d), *q_rot = scratch(1, t * d), *v_rows = scratch(2, t * d);
  float *go = scratch(3, t * d), *dq_rot = scratch(4, t * d), *dk_rot = scratch(5, t * d);
  float *dv_rows = scratch(6, t * d), *probs = scratch(7, kRowBlock * t);
  float* dprobs = scratch(8, kRowBlock * t);
  std::fill(dk_rot, dk_rot + t * d, 0.0f);  // the two accumulated over the group's heads
  std::fill(dv_rows, dv_rows + t * d, 0.0f);
  rotate_rows(head_start<In>(k, b, g, d), k.stride(1), c, sn, t, d, k_rot);
  load_rows(head_start<In>(v, b, g, d), v.stride(1), t, d, v_rows);
  for (int64_t h = g * s.group(); h < (g + 1) * s.group(); ++h) {
    rotate_rows(head_start<In>(q, b, h, d), q.stride(1), c, sn, t, d, q_rot);
    load_rows(head_start<In>(grad, b, h, d), grad.stride(1), t, d, go);
    for (int64_t first = 0; first < t; first += kRowBlock) {
      const int64_t rows = std::min(kRowBlock, t - first), keys = first + rows;
      block_probabilities(q_rot, k_rot, first, rows, d, scale, probs);
      const float* go_block = go + first * d;
      // dV += P^T dO; dP = dO V^T
      sgemm('T', 'N', keys, d, rows, probs, keys, go_block, d, true, dv_rows, d);
      sgemm('N', 'T', rows, keys, d, go_block, d, v_rows, d, false, dprobs, keys);
      // dS = P (dP - rowsum(dP P)) scale, in place in dprobs.
      for (int64_t r = 0; r < rows; ++r)
        softmax_backward_row(probs + r * keys, dprobs + r * keys, keys, scale);
      // dQ_block = dS K; dK += dS^T Q_block
      sgemm('N', 'N', rows, d, keys, dprobs, keys, k_rot, d, false, dq_rot + first * d, d);
      sgemm('T', 'N', keys, d, rows, dprobs, keys, q_rot + first * d, d, true, dk_rot, d);
    }
    rotate_rows_back(dq_rot, c, sn, t, d, head_start<In>(dq, b, h, d), dq.stride(1));
  }
  rotate_rows_back(dk_rot, c, sn, t, d, head_start<In>(dk, b, g, d), dk.stride(1));
  store_rows(dv_rows, t, d, head_start<In>(dv, b, g, d), dv.stride(1));
}

// float32 and bfloat16 where the build has oneDNN's sgemm; float64 (and float32 without it) on
// libtorch's ops.
bool runs_on_sgemm(const Tensor& q) {
  return have_sgemm() && is_float_or_bf16(q.scalar_type());
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

// Every task, on the path q's dtype takes: on_sgemm(tag, b, g) for float32 and bfloat16 where the
// build has oneDNN, else on_ops(tag, b, g) on libtorch's ops (float64; float32 without oneDNN);
// tag is a value of the element type.
template <typename Sgemm, typename Ops>
void run_tasks(const Tensor& q, const AttentionShape& s, const Sgemm& on_sgemm, const Ops& on_ops) {
  if (runs_on_sgemm(q)) {
    float_or_bf16(q.scalar_type(), [&](auto tag) {
      for_each_task(s, [&](int64_t b, int64_t g) { on_sgemm(tag, b, g); });
    });
    return;
  }
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
    run_tasks(
        q, s,
        [&](auto tag, int64_t b, int64_t g) {
          using In = decltype(tag);
          forward_task_sgemm<In>(q, k, v, cos, sin, s, b, g, out);
        },
        [&](auto tag, int64_t b, int64_t g) {
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
    run_tasks(
        q, s,
        [&](auto tag, int64_t b, int64_t g) {
          using In = decltype(tag);
          backward_task_sgemm<In>(q, k, v, cos, sin, grad, s, b, g, dq, dk, dv);
        },
        [&](auto tag, int64_t b, int64_t g) {
          using T = decltype(tag);
          backward_task<T>(q, k, v, cos, sin, grad, s, b, g, dq, dk, dv);
        });
    return {dq, dk, dv, Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

bool fused_causal_attention_applies(const torch::Tensor& q) {
  const auto t = q.scalar_type();
  return q.device().is_cpu() &&
         (t == torch::kFloat || t == torch::kDouble || (t == torch::kBFloat16 && have_sgemm()));
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
