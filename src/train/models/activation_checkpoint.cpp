// The recomputing autograd function behind checkpointed().
#include "train/models/activation_checkpoint.h"

#include <torch/csrc/autograd/custom_function.h>

namespace gpulab::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using BlockFn = std::function<torch::Tensor(const torch::Tensor&)>;

// The block travels with the node (a capsule in saved_data) so that it outlives the caller.
struct BlockHolder : torch::CustomClassHolder {
  explicit BlockHolder(BlockFn f) : fn(std::move(f)) {}
  BlockFn fn;
};

struct Checkpoint : torch::autograd::Function<Checkpoint> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, at::TensorList params,
                               const BlockFn* fn) {
    // Autograd is off here (Function::apply): the block keeps no graph and no activations.
    ctx->save_for_backward({x});
    ctx->saved_data["fn"] = c10::IValue::make_capsule(c10::make_intrusive<BlockHolder>(*fn));
    ctx->saved_data["params"] = params.vec();
    return (*fn)(x);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    auto holder =
        c10::static_intrusive_pointer_cast<BlockHolder>(ctx->saved_data["fn"].toCapsule());
    const std::vector<torch::Tensor> params = ctx->saved_data["params"].toTensorVector();
    torch::Tensor y, x_again;
    variable_list inputs;
    {
      torch::AutoGradMode enable(true);
      x_again = x.detach().requires_grad_(x.requires_grad());
      y = holder->fn(x_again);
    }
    if (x.requires_grad()) inputs.push_back(x_again);
    // The recomputation read the parameters themselves, so differentiate with respect to them.
    for (const auto& p : params) inputs.push_back(p);
    variable_list grads = torch::autograd::grad({y}, inputs, {grad_out[0]},
                                                /*retain_graph=*/false, /*create_graph=*/false,
                                                /*allow_unused=*/true);
    variable_list out;
    size_t i = 0;
    out.push_back(x.requires_grad() ? grads[i++] : torch::Tensor());
    for (size_t k = 0; k < params.size(); ++k) out.push_back(grads[i++]);
    out.emplace_back();  // the block pointer
    return out;
  }
};

}  // namespace

torch::Tensor checkpointed(const BlockFn& fn, const torch::Tensor& x,
                           const std::vector<torch::Tensor>& params) {
  if (!torch::GradMode::is_enabled()) return fn(x);
  std::vector<torch::Tensor> trained;
  for (const auto& p : params)
    if (p.requires_grad()) trained.push_back(p);
  return Checkpoint::apply(x, at::TensorList(trained), &fn);
}

}  // namespace gpulab::train
