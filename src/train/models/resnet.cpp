// ResNet family (torchvision.models.resnet): resnet18/34/50/101/152, resnext50_32x4d and
// wide_resnet50_2, with torchvision's module names so state dicts move both ways unchanged.
#include "train/models/layers.h"
#include "train/models/registry.h"
#include "train/ops/pointwise_conv.h"
#include "train/unit_hooks.h"

namespace gpulab::train {
namespace {

// relu(bn(x) + residual), in place as torchvision's ReLU(inplace=True) and `out += identity`:
// fewer saved tensors. (A fused kernel for it was tried and dropped: slower on a quiet machine,
// and it trained worse; docs/benchmarks.md, session 4.)
torch::Tensor batch_norm_relu(BatchNorm2dImpl& bn, const torch::Tensor& x,
                              const torch::Tensor& residual = {}) {
  auto y = bn.forward(x);
  if (residual.defined()) y += residual;
  return y.relu_();
}

// BasicBlock (two 3x3 convs) and Bottleneck (1x1, grouped 3x3, 1x1 with 4x expansion) in one
// class: names match torchvision's (conv1/bn1/.../conv3/bn3, downsample.0/.1).
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(bool bottleneck, int64_t inplanes, int64_t planes, int64_t stride, int64_t groups,
            int64_t base_width)
      : bottleneck_(bottleneck) {
    const int64_t expansion = bottleneck ? 4 : 1;
    if (bottleneck) {
      const int64_t width = static_cast<int64_t>(planes * (base_width / 64.0)) * groups;
      conv1_ = register_module("conv1", conv2d(inplanes, width, 1));
      bn1_ = register_module("bn1", batch_norm(width));
      conv2_ = register_module("conv2", conv2d(width, width, 3, stride, 1, groups));
      bn2_ = register_module("bn2", batch_norm(width));
      conv3_ = register_module("conv3", conv2d(width, planes * expansion, 1));
      bn3_ = register_module("bn3", batch_norm(planes * expansion));
    } else {
      conv1_ = register_module("conv1", conv2d(inplanes, planes, 3, stride, 1));
      bn1_ = register_module("bn1", batch_norm(planes));
      conv2_ = register_module("conv2", conv2d(planes, planes, 3, 1, 1));
      bn2_ = register_module("bn2", batch_norm(planes));
    }
    if (stride != 1 || inplanes != planes * expansion) {
      downsample_ = register_module(
          "downsample",
          Seq(conv2d(inplanes, planes * expansion, 1, stride), batch_norm(planes * expansion)));
    }
  }

  // In-place ReLU and residual add, as torchvision's ReLU(inplace=True) and `out += identity`:
  // fewer activations kept for backward (peak memory) and fewer allocations per step.
  // The last BatchNorm, the residual add and the ReLU go through one call (a fused kernel where
  // there is one); the identity branch is computed just before it, as torchvision orders it.
  torch::Tensor forward(torch::Tensor x) {
    auto out = batch_norm_relu(*bn1_, conv2d_forward(*conv1_, x));
    if (bottleneck_) out = batch_norm_relu(*bn2_, conv2d_forward(*conv2_, out));
    auto last = conv2d_forward(bottleneck_ ? *conv3_ : *conv2_, out);
    auto identity = downsample_ ? downsample_->forward(x) : x;
    return batch_norm_relu(bottleneck_ ? *bn3_ : *bn2_, last, identity);
  }

 private:
  bool bottleneck_;
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  Seq downsample_{nullptr};
};
TORCH_MODULE(Block);

struct ResNetSpec {
  bool bottleneck;
  std::array<int64_t, 4> layers;
  int64_t groups = 1;
  int64_t width_per_group = 64;
};

class ResNet : public Classifier {
 public:
  ResNet(const ResNetSpec& spec, int64_t num_classes) {
    conv1_ = register_module("conv1", conv2d(3, 64, 7, 2, 3));
    bn1_ = register_module("bn1", batch_norm(64));
    int64_t inplanes = 64;
    const int64_t expansion = spec.bottleneck ? 4 : 1;
    for (int i = 0; i < 4; ++i) {
      const int64_t planes = int64_t{64} << i;
      torch::nn::Sequential layer;
      for (int64_t b = 0; b < spec.layers[i]; ++b) {
        const int64_t stride = (b == 0 && i > 0) ? 2 : 1;
        layer->push_back(
            Block(spec.bottleneck, inplanes, planes, stride, spec.groups, spec.width_per_group));
        inplanes = planes * expansion;
      }
      layers_[i] = register_module("layer" + std::to_string(i + 1), layer);
    }
    fc_ = register_module("fc", torch::nn::Linear(512 * expansion, num_classes));
    // torchvision: Kaiming normal (fan_out, relu) for convs, BN weight 1 / bias 0.
    init_weights(*this, ConvInit::kKaimingFanOutRelu, LinearInit::kKeep);
  }

  torch::Tensor forward(torch::Tensor x) override {
    x = batch_norm_relu(*bn1_, conv1_->forward(x));
    x = torch::max_pool2d(x, 3, 2, 1);
    // Each stage is one unit of sharded data parallel (train/unit_hooks.h).
    for (auto& layer : layers_) x = run_unit(*layer, [&] { return layer->forward(x); });
    x = torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1);
    return fc_->forward(x);
  }

 private:
  torch::nn::Conv2d conv1_{nullptr};
  BatchNorm2d bn1_{nullptr};
  std::array<torch::nn::Sequential, 4> layers_;
  torch::nn::Linear fc_{nullptr};
};

void add_resnet(std::vector<ModelInfo>& table, const char* name, ResNetSpec spec) {
  ModelInfo info;
  info.name = name;
  info.family = "resnet";
  info.default_image_size = 224;
  info.min_image_size = 32;  // five stride-2 stages: 32 px reaches layer4 at 1x1
  info.make = [spec](const ModelOptions& o) -> ClassifierPtr {
    return std::make_shared<ResNet>(spec, o.num_classes);
  };
  table.push_back(std::move(info));
}

}  // namespace

void add_resnet_models(std::vector<ModelInfo>& table) {
  add_resnet(table, "resnet18", {false, {2, 2, 2, 2}});
  add_resnet(table, "resnet34", {false, {3, 4, 6, 3}});
  add_resnet(table, "resnet50", {true, {3, 4, 6, 3}});
  add_resnet(table, "resnet101", {true, {3, 4, 23, 3}});
  add_resnet(table, "resnet152", {true, {3, 8, 36, 3}});
  add_resnet(table, "resnext50_32x4d", {true, {3, 4, 6, 3}, 32, 4});
  add_resnet(table, "wide_resnet50_2", {true, {3, 4, 6, 3}, 1, 128});
}

}  // namespace gpulab::train
