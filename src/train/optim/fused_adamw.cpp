// One-pass AdamW step (see fused_adamw.h).
#include "train/optim/fused_adamw.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "train/optim/state_key.h"
#include "train/parallel_chunks.h"

namespace gpulab::train {
namespace {

struct AdamwCoeffs {
  float decay_factor, beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_bc2, eps;
};

void adamw_kernel(float* __restrict p, const float* __restrict g, float* __restrict m,
                  float* __restrict v, int64_t n, AdamwCoeffs c) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * c.beta1 + gi * c.one_minus_beta1;
    const float vi = v[i] * c.beta2 + gi * gi * c.one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * c.decay_factor - c.step_size * mi / (std::sqrt(vi) * c.inv_sqrt_bc2 + c.eps);
  }
}

bool dense_like(const torch::Tensor& a, const torch::Tensor& p) {
  return a.defined() && a.device().is_cpu() && a.scalar_type() == torch::kFloat &&
         a.is_contiguous() && a.sizes() == p.sizes();
}

}  // namespace

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  RECORD_FUNCTION("gpulab::FusedAdamW::step", std::vector<c10::IValue>());
  struct Update {
    float *p, *m, *v;
    const float* g;
    int64_t n;
    AdamwCoeffs c;
  };
  std::vector<Update> updates;
  std::vector<torch::Tensor> others;  // for libtorch's own step
  int64_t total = 0;
  fused_params_ = 0;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const torch::Tensor& g = p.grad();
      if (o.amsgrad() || !dense_like(p, p) || !dense_like(g, p)) {
        others.push_back(p);
        continue;
      }
      const StateKey key = state_key(p);
      auto it = state_.find(key);
      if (it == state_.end()) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Contiguous));
        it = state_.emplace(key, std::move(fresh)).first;
      }
      auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
      if (!dense_like(st.exp_avg(), p)) st.exp_avg(st.exp_avg().contiguous());
      if (!dense_like(st.exp_avg_sq(), p)) st.exp_avg_sq(st.exp_avg_sq().contiguous());
      st.step(st.step() + 1);
      const auto [beta1, beta2] = o.betas();
      const double bc1 = 1 - std::pow(beta1, static_cast<double>(st.step()));
      const double bc2 = 1 - std::pow(beta2, static_cast<double>(st.step()));
      const AdamwCoeffs c{static_cast<float>(1 - o.lr() * o.weight_decay()),
                          static_cast<float>(beta1),
                          static_cast<float>(1 - beta1),
                          static_cast<float>(beta2),
                          static_cast<float>(1 - beta2),
                          static_cast<float>(o.lr() / bc1),
                          static_cast<float>(1 / std::sqrt(bc2)),
                          static_cast<float>(o.eps())};
      updates.push_back({p.data_ptr<float>(), st.exp_avg().data_ptr<float>(),
                         st.exp_avg_sq().data_ptr<float>(), g.data_ptr<float>(), p.numel(), c});
      total += p.numel();
      ++fused_params_;
    }
  }
  const int64_t chunks = std::clamp<int64_t>(total >> 16, 1, at::get_num_threads());
  parallel_chunks(chunks, [&](int64_t t) {
    for (const Update& u : updates) {
      const int64_t begin = u.n * t / chunks, end = u.n * (t + 1) / chunks;
      adamw_kernel(u.p + begin, u.g + begin, u.m + begin, u.v + begin, end - begin, u.c);
    }
  });
  if (!others.empty()) {
    // Hide the fused parameters' gradients from libtorch's step, then restore them.
    std::vector<std::pair<torch::Tensor, torch::Tensor>> hidden;
    for (auto& group : param_groups_)
      for (auto& p : group.params())
        if (p.grad().defined() &&
            std::find_if(others.begin(), others.end(),
                         [&](const torch::Tensor& q) { return q.is_same(p); }) == others.end()) {
          hidden.emplace_back(p, p.grad());
          p.mutable_grad() = torch::Tensor();
        }
    torch::optim::AdamW::step();
    for (auto& [p, g] : hidden) p.mutable_grad() = g;
  }
  return loss;
}

}  // namespace gpulab::train
