// SGD through at::_fused_sgd_ (see fused_sgd.h).
#include "train/optim/fused_sgd.h"

#include <ATen/record_function.h>

#include <map>
#include <tuple>
#include <vector>

#include "train/optim/state_key.h"

namespace gpulab::train {

// The tensors of one _fused_sgd_ call: one device and dtype, and either every momentum buffer
// new (the op then copies the gradient into it, as torch.optim.SGD's first step) or none.
struct FusedSgd::FusedBatch {
  std::vector<torch::Tensor> params, grads, buffers;
};

namespace {

// Two dense tensors of the same sizes whose elements lie in the same order in memory: their
// strides agree wherever a size is above 1 (a 1x1 conv weight's gradient may carry other strides
// over its size-1 dims, as AccumulateGrad's layout contract allows).
bool same_memory_order(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.sizes() != b.sizes() || !a.is_non_overlapping_and_dense() ||
      !b.is_non_overlapping_and_dense())
    return false;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  return true;
}

// The op walks parameter, gradient and buffer as flat arrays: they must share one memory order
// (measured: a channels-last parameter with a contiguous gradient was updated wrongly).
bool sgd_takes(const torch::Tensor& p, const torch::Tensor& g) {
  return p.is_floating_point() && !g.is_sparse() && g.scalar_type() == p.scalar_type() &&
         g.device() == p.device() && same_memory_order(g, p);
}

// t's elements as the flat array they are in memory. The op's CPU kernel makes a contiguous copy
// of every gradient that is not contiguous and then reads the original anyway (PyTorch 2.15,
// FusedSGDKernel.cpp): a wasted copy per channels-last 3x3 weight each step (7 ms of a ResNet-50
// step at 32 px). Parameter, gradient and buffer share their memory order (sgd_takes), so the
// flat views pair the same elements.
torch::Tensor flat(const torch::Tensor& t) {
  return t.is_contiguous() ? t : t.as_strided({t.numel()}, {1}, t.storage_offset());
}

}  // namespace

torch::Tensor FusedSgd::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  RECORD_FUNCTION("gpulab::FusedSgd::step", std::vector<c10::IValue>());
  fused_params_ = 0;
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::SGDOptions&>(group.options());
    const double wd = o.weight_decay(), mu = o.momentum(), damp = o.dampening();
    Batches batches;
    for (auto& p : group.params()) {
      const torch::Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      if (sgd_takes(p, grad)) {
        add_to_batch(p, mu != 0, batches);
        continue;
      }
      libtorch_update(p, o);
    }
    for (auto& [kind, b] : batches) {
      const bool first = std::get<3>(kind);
      at::_fused_sgd_(b.params, b.grads, b.buffers, wd, mu, o.lr(), damp, o.nesterov(),
                      /*maximize=*/false, first);
      fused_params_ += static_cast<int64_t>(b.params.size());
    }
  }
  return loss;
}

void FusedSgd::add_to_batch(const torch::Tensor& p, bool momentum, Batches& batches) {
  bool first = false;
  torch::Tensor buf;
  if (momentum) {
    const StateKey key = state_key(p);
    auto it = state_.find(key);
    if (it == state_.end()) {
      auto fresh = std::make_unique<torch::optim::SGDParamState>();
      fresh->momentum_buffer(torch::empty_like(p));  // the parameter's layout
      it = state_.emplace(key, std::move(fresh)).first;
      first = true;
    }
    auto& st = static_cast<torch::optim::SGDParamState&>(*it->second);
    // A buffer restored in another layout takes the parameter's once.
    if (!same_memory_order(st.momentum_buffer(), p))
      st.momentum_buffer(torch::empty_like(p).copy_(st.momentum_buffer()));
    buf = st.momentum_buffer();
  }
  auto& b = batches[{p.device().type(), p.device().index(), p.scalar_type(), first}];
  b.params.push_back(flat(p));
  b.grads.push_back(flat(p.grad()));
  if (buf.defined()) b.buffers.push_back(flat(buf));
}

// libtorch's own sequence (any layout the op cannot take).
void FusedSgd::libtorch_update(torch::Tensor& p, const torch::optim::SGDOptions& o) {
  const double wd = o.weight_decay(), mu = o.momentum(), damp = o.dampening();
  torch::Tensor d_p = p.grad();
  if (wd != 0) d_p = d_p.add(p, wd);
  if (mu != 0) {
    const StateKey key = state_key(p);
    auto it = state_.find(key);
    torch::Tensor buf;
    if (it == state_.end()) {
      buf = torch::clone(d_p).detach();
      auto fresh = std::make_unique<torch::optim::SGDParamState>();
      fresh->momentum_buffer(buf);
      state_[key] = std::move(fresh);
    } else {
      buf = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
      buf.mul_(mu).add_(d_p, 1 - damp);
    }
    d_p = o.nesterov() ? d_p.add(buf, mu) : buf;
  }
  p.add_(d_p, -1 * o.lr());
}

}  // namespace gpulab::train
