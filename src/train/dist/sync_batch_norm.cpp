// SyncBatchNorm: two all-reduces per layer (sum and count, then squared deviations), so the
// variance is computed in two passes like the stock kernel, not as E[x^2] - E[x]^2.
#include "train/dist/sync_batch_norm.h"

#include <ATen/ops/batch_norm_native.h>
#include <torch/library.h>

#include <mutex>

namespace gpulab::train::dist {

namespace {

std::mutex g_mu;
std::shared_ptr<Communicator> g_comm;        // set while sync mode is on
std::unique_ptr<torch::Library> g_cpu_impl;  // the kernel registrations, made on first use
std::unique_ptr<torch::Library> g_cuda_impl;

std::shared_ptr<Communicator> active_comm() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_comm;
}

// Sum over ranks as an autograd function: d(sum_r x_r)/dx_r = 1, and every rank's loss depends
// on the sum, so the gradient flowing back is itself the sum of the ranks' gradients.
struct AllReduceSum : public torch::autograd::Function<AllReduceSum> {
  static torch::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, torch::Tensor x) {
    auto comm = active_comm();
    auto y = x.detach().clone();
    comm->allreduce_sum(y, "SyncBatchNorm statistics all-reduce");
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    auto comm = active_comm();
    auto g = grads[0].contiguous().clone();
    comm->allreduce_sum(g, "SyncBatchNorm gradient all-reduce");
    return {g};
  }
};

torch::Tensor value_or_undefined(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? *t : torch::Tensor();
}

at::Tensor batch_norm_kernel(const at::Tensor& input, const c10::optional<at::Tensor>& weight,
                             const c10::optional<at::Tensor>& bias,
                             const c10::optional<at::Tensor>& running_mean,
                             const c10::optional<at::Tensor>& running_var, bool training,
                             double momentum, double eps, bool cudnn_enabled) {
  auto comm = training ? active_comm() : nullptr;
  if (!comm || comm->size() == 1) {
    return at::native::batch_norm(input, weight, bias, running_mean, running_var, training,
                                  momentum, eps, cudnn_enabled);
  }
  return sync_batch_norm(input, value_or_undefined(weight), value_or_undefined(bias),
                         value_or_undefined(running_mean), value_or_undefined(running_var),
                         momentum, eps, *comm);
}

}  // namespace

void set_sync_batch_norm(std::shared_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_comm = std::move(comm);
  if (g_comm && !g_cpu_impl) {
    // A direct kernel for the Autograd keys takes precedence over batch_norm's composite one.
    g_cpu_impl = std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", c10::DispatchKey::AutogradCPU, __FILE__, __LINE__);
    g_cpu_impl->impl("batch_norm", TORCH_FN(batch_norm_kernel));
    g_cuda_impl = std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", c10::DispatchKey::AutogradCUDA, __FILE__, __LINE__);
    g_cuda_impl->impl("batch_norm", TORCH_FN(batch_norm_kernel));
  }
}

bool sync_batch_norm_enabled() {
  return active_comm() != nullptr;
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
  auto stats = AllReduceSum::apply(torch::cat({x.sum(dims), count}));
  auto total = stats.narrow(0, channels, 1).detach();
  auto mean = stats.narrow(0, 0, channels) / total;
  // Pass 2: global sum of squared deviations -> biased variance.
  auto xc = x - mean.view(shape);
  auto var = AllReduceSum::apply((xc * xc).sum(dims)) / total;
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
