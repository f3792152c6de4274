// SyncBatchNorm: the swap into a model, and the computation: two all-reduces per layer (sum and
// count, then squared deviations), so the variance is computed in two passes like the stock
// kernel, not as E[x^2] - E[x]^2.
#include "train/dist/sync_batch_norm.h"

#include <string>
#include <utility>

#include "core/error.h"

namespace gpulab::train::dist {

namespace {

// Sum over ranks as an autograd function: d(sum_r x_r)/dx_r = 1, and every rank's loss depends
// on the sum, so the gradient flowing back is itself the sum of the ranks' gradients. The
// communicator travels as its address in the saved data (it outlives the step's graph).
struct AllReduceSum : public torch::autograd::Function<AllReduceSum> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               Communicator* comm) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    auto y = x.detach().clone();
    comm->allreduce_sum(y, "SyncBatchNorm statistics all-reduce");
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* comm = reinterpret_cast<Communicator*>(ctx->saved_data["comm"].toInt());
    auto g = grads[0].contiguous().clone();
    comm->allreduce_sum(g, "SyncBatchNorm gradient all-reduce");
    return {g, torch::Tensor()};
  }
};

// Walks the tree below `parent` ("prefix" names it) and swaps each BatchNorm2d in place.
int convert_children(torch::nn::Module& parent, const std::string& prefix,
                     const std::shared_ptr<Communicator>& comm) {
  int swapped = 0;
  for (const auto& item : parent.named_children()) {
    const std::string path = prefix.empty() ? item.key() : prefix + "." + item.key();
    const std::shared_ptr<torch::nn::Module>& child = item.value();
    if (auto bn = std::dynamic_pointer_cast<train::BatchNorm2dImpl>(child)) {
      auto sync = std::make_shared<SyncBatchNormImpl>(*bn, comm);
      parent.replace_module(item.key(), sync);
      bn->hand_over_to([sync](const torch::Tensor& x) { return sync->forward(x); });
      ++swapped;
    } else if (child->as<torch::nn::BatchNorm1d>() || child->as<torch::nn::BatchNorm2d>() ||
               child->as<torch::nn::BatchNorm3d>()) {
      throw Exception(Code::kUnsupported,
                      "--sync_bn: the model calls torch's own BatchNorm module '" + path +
                          "', which cannot be replaced by a SyncBatchNorm",
                      "build it with train::BatchNorm2d (train/models/batch_norm.h), or drop "
                      "--sync_bn");
    } else {
      swapped += convert_children(*child, path, comm);
    }
  }
  return swapped;
}

}  // namespace

SyncBatchNormImpl::SyncBatchNormImpl(const train::BatchNorm2dImpl& bn,
                                     std::shared_ptr<Communicator> comm)
    : torch::nn::Module("SyncBatchNorm"), options(bn.options), comm_(std::move(comm)) {
  // The same tensors under the same names: a checkpoint, the optimizer and the gradient reducer
  // see the model exactly as before.
  if (bn.weight.defined())
    weight = register_parameter("weight", bn.weight, bn.weight.requires_grad());
  if (bn.bias.defined()) bias = register_parameter("bias", bn.bias, bn.bias.requires_grad());
  if (bn.running_mean.defined()) running_mean = register_buffer("running_mean", bn.running_mean);
  if (bn.running_var.defined()) running_var = register_buffer("running_var", bn.running_var);
  if (bn.num_batches_tracked.defined())
    num_batches_tracked = register_buffer("num_batches_tracked", bn.num_batches_tracked);
  train(bn.is_training());
}

// torch's BatchNorm forward (momentum, num_batches_tracked), with the statistics over all ranks
// where torch's would use this rank's batch.
torch::Tensor SyncBatchNormImpl::forward(const torch::Tensor& input) {
  double momentum = options.momentum().value_or(0.0);
  if (is_training() && options.track_running_stats() && num_batches_tracked.defined()) {
    num_batches_tracked += 1;
    if (!options.momentum()) momentum = 1.0 / num_batches_tracked.item<double>();
  }
  const bool batch_stats = is_training() || !options.track_running_stats();
  if (!batch_stats || comm_->size() == 1)
    return torch::batch_norm(input, weight, bias, running_mean, running_var, batch_stats, momentum,
                             options.eps(), at::globalContext().userEnabledCuDNN());
  return sync_batch_norm(input, weight, bias, running_mean, running_var, momentum, options.eps(),
                         *comm_);
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << "gpulab::SyncBatchNorm(" << options.num_features() << ", eps=" << options.eps()
         << ", momentum=" << options.momentum().value_or(0.0) << ", ranks=" << comm_->size() << ")";
}

int convert_sync_batch_norm(torch::nn::Module& model, const std::shared_ptr<Communicator>& comm) {
  return convert_children(model, "", comm);
}

torch::Tensor sync_batch_norm(const torch::Tensor& input, const torch::Tensor& weight,
                              const torch::Tensor& bias, const torch::Tensor& running_mean,
                              const torch::Tensor& running_var, double momentum, double eps,
                              Communicator& comm) {
  const int64_t channels = input.size(1);
  std::vector<int64_t> dims{0};
  std::vector<int64_t> shape(static_cast<size_t>(input.dim()), 1);
  shape[1] = channels;
  for (int64_t d = 2; d < input.dim(); ++d) dims.push_back(d);
  // Statistics in fp32 at least (autocast may hand us half inputs).
  auto x = input.scalar_type() == torch::kDouble ? input : input.to(torch::kFloat);
  const double local_count = static_cast<double>(input.numel() / std::max<int64_t>(1, channels));

  // Pass 1: global sum and count -> mean.
  auto count = torch::full({1}, local_count, x.options().requires_grad(false));
  auto stats = AllReduceSum::apply(torch::cat({x.sum(dims), count}), &comm);
  auto total = stats.narrow(0, channels, 1).detach();
  auto mean = stats.narrow(0, 0, channels) / total;
  // Pass 2: global sum of squared deviations -> biased variance.
  auto xc = x - mean.view(shape);
  auto var = AllReduceSum::apply((xc * xc).sum(dims), &comm) / total;
  auto y = xc * torch::rsqrt(var + eps).view(shape);
  if (weight.defined()) y = y * weight.view(shape);
  if (bias.defined()) y = y + bias.view(shape);

  if (running_mean.defined() && running_var.defined()) {
    torch::NoGradGuard no_grad;
    const double n = total.item<double>();
    running_mean.mul_(1 - momentum).add_(mean.detach().to(running_mean.dtype()), momentum);
    auto unbiased = var.detach() * (n / std::max(1.0, n - 1));
    running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype()), momentum);
  }
  return y.to(input.scalar_type());
}

}  // namespace gpulab::train::dist
