// BatchNorm2d as torch::nn::BatchNorm2d computes it, with a hand-over to the module that
// replaced it.
#include "train/models/batch_norm.h"

#include <utility>

#include "core/error.h"

namespace gpulab::train {

BatchNorm2dImpl::BatchNorm2dImpl(const torch::nn::BatchNormOptions& options) : options(options) {
  BatchNorm2dImpl::reset();
}

// torch's registration order and initial values: weight 1, bias 0, mean 0, variance 1.
void BatchNorm2dImpl::reset() {
  GPULAB_ASSERT(options.affine() && options.track_running_stats(),
                "BatchNorm2d: the models use affine BatchNorm with running statistics");
  const int64_t n = options.num_features();
  weight = register_parameter("weight", torch::ones({n}));
  bias = register_parameter("bias", torch::zeros({n}));
  running_mean = register_buffer("running_mean", torch::zeros({n}));
  running_var = register_buffer("running_var", torch::ones({n}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::tensor(0, torch::kLong));
}

void BatchNorm2dImpl::pretty_print(std::ostream& stream) const {
  stream << "torch::nn::BatchNorm2d(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=" << options.momentum().value_or(0.0) << ", affine=true"
         << ", track_running_stats=true)";
}

// As torch::nn::BatchNormImplBase::forward: momentum (or a cumulative average without one),
// batch statistics in training, running ones in evaluation.
torch::Tensor BatchNorm2dImpl::forward(const torch::Tensor& input) {
  if (replacement_) return replacement_(input);
  TORCH_CHECK(input.dim() == 4, "expected 4D input (got ", input.dim(), "D input)");
  double momentum = options.momentum().value_or(0.0);
  if (is_training()) {
    TORCH_CHECK(input.numel() / input.size(1) != 1,
                "Expected more than 1 value per channel when training, got input size ",
                input.sizes());
    num_batches_tracked += 1;
    if (!options.momentum()) momentum = 1.0 / num_batches_tracked.item<double>();
  }
  return torch::batch_norm(input, weight, bias, running_mean, running_var, is_training(), momentum,
                           options.eps(), at::globalContext().userEnabledCuDNN());
}

void BatchNorm2dImpl::hand_over_to(std::function<torch::Tensor(const torch::Tensor&)> forward) {
  replacement_ = std::move(forward);
}

}  // namespace gpulab::train
