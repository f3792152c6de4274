// A Conv2d's geometry, and what the CPU convolution autograd functions keep for their backward.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

namespace gpulab::train {

// Stride, padding and dilation (h, w) and groups of a Conv2d with numeric zero padding.
struct ConvGeometry {
  std::array<int64_t, 2> stride{}, padding{}, dilation{};
  int64_t groups = 1;
};

// What a convolution's backward reads back: its inputs, geometry and which gradients it owes.
struct SavedConv {
  torch::Tensor x, weight;
  ConvGeometry g;
  bool x_grad = false, bias_grad = false;
};

inline void save_conv(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                      const torch::Tensor& weight, const c10::optional<torch::Tensor>& bias,
                      const ConvGeometry& g) {
  ctx->save_for_backward({x, weight});
  ctx->saved_data["geometry"] = std::vector<int64_t>{
      g.stride[0], g.stride[1], g.padding[0], g.padding[1], g.dilation[0], g.dilation[1], g.groups};
  ctx->saved_data["x_grad"] = x.requires_grad();
  ctx->saved_data["bias_grad"] = bias.has_value() && bias->requires_grad();
}

inline SavedConv saved_conv(torch::autograd::AutogradContext* ctx) {
  const auto saved = ctx->get_saved_variables();
  const auto v = ctx->saved_data["geometry"].toIntVector();
  return {saved[0], saved[1], ConvGeometry{{v[0], v[1]}, {v[2], v[3]}, {v[4], v[5]}, v[6]},
          ctx->saved_data["x_grad"].toBool(), ctx->saved_data["bias_grad"].toBool()};
}

}  // namespace gpulab::train
