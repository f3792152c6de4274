// Vision Transformers (vit_b_16, vit_b_32, vit_l_16) with torchvision's parameter names
// (conv_proj, class_token, encoder.layers.encoder_layer_N.*, heads.head), init and any image size
// divisible by the patch size (the position table is sized for it).
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/models/layers.h"
#include "train/models/registry.h"

namespace gpulab::train {
namespace {

// nn.MultiheadAttention(batch_first=True) as the encoder uses it: self-attention only, with its
// parameter names (in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias).
class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(int64_t dim, int64_t heads, double attention_dropout)
      : heads_(heads), attention_dropout_(attention_dropout) {
    in_proj_weight_ = register_parameter("in_proj_weight", torch::empty({3 * dim, dim}));
    in_proj_bias_ = register_parameter("in_proj_bias", torch::zeros({3 * dim}));
    out_proj_ = register_module("out_proj", torch::nn::Linear(dim, dim));
    torch::NoGradGuard no_grad;
    torch::nn::init::xavier_uniform_(in_proj_weight_);
    out_proj_->bias.zero_();
  }

  torch::Tensor forward(torch::Tensor x) {  // N x L x E
    const int64_t n = x.size(0), len = x.size(1), dim = x.size(2), head_dim = dim / heads_;
    auto qkv = torch::nn::functional::linear(x, in_proj_weight_, in_proj_bias_)
                   .view({n, len, 3, heads_, head_dim})
                   .permute({2, 0, 3, 1, 4});  // 3 x N x H x L x D
    auto q = qkv[0] / std::sqrt(static_cast<double>(head_dim));
    auto attn = torch::softmax(torch::matmul(q, qkv[1].transpose(-2, -1)), -1);
    if (attention_dropout_ > 0) attn = torch::dropout(attn, attention_dropout_, is_training());
    auto out = torch::matmul(attn, qkv[2]).transpose(1, 2).reshape({n, len, dim});
    return out_proj_->forward(out);
  }

 private:
  int64_t heads_;
  double attention_dropout_;
  torch::Tensor in_proj_weight_, in_proj_bias_;
  torch::nn::Linear out_proj_{nullptr};
};
TORCH_MODULE(SelfAttention);

// Pre-norm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)); mlp = Linear "0", GELU "1",
// Dropout "2", Linear "3", Dropout "4" (torchvision's MLPBlock, version 2 names).
class EncoderBlockImpl : public torch::nn::Module {
 public:
  EncoderBlockImpl(int64_t heads, int64_t dim, int64_t mlp_dim, double dropout) {
    auto ln = [&] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(1e-6)); };
    ln_1_ = register_module("ln_1", ln());
    self_attention_ = register_module("self_attention", SelfAttention(dim, heads, 0.0));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
    ln_2_ = register_module("ln_2", ln());
    torch::nn::Linear fc1(dim, mlp_dim), fc2(mlp_dim, dim);
    mlp_ = register_module("mlp", Seq(fc1, torch::nn::GELU(), torch::nn::Dropout(dropout), fc2,
                                      torch::nn::Dropout(dropout)));
    torch::NoGradGuard no_grad;
    for (auto* fc : {fc1.get(), fc2.get()}) {
      torch::nn::init::xavier_uniform_(fc->weight);
      fc->bias.normal_(0, 1e-6);
    }
  }

  torch::Tensor forward(torch::Tensor input) {
    auto x = dropout_->forward(self_attention_->forward(ln_1_->forward(input))) + input;
    return x + mlp_->forward(ln_2_->forward(x));
  }

 private:
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  SelfAttention self_attention_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  Seq mlp_{nullptr};
};
TORCH_MODULE(EncoderBlock);

struct VitConfig {
  const char* name;
  int64_t patch;
  int64_t layers;
  int64_t heads;
  int64_t hidden;
  int64_t mlp;
};

// torchvision's Encoder: pos_embedding, dropout, layers.encoder_layer_N, ln.
class EncoderImpl : public torch::nn::Module {
 public:
  EncoderImpl(const VitConfig& c, int64_t seq_length, double dropout) {
    pos_embedding_ = register_parameter("pos_embedding",
                                        torch::empty({1, seq_length, c.hidden}).normal_(0, 0.02));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
    torch::OrderedDict<std::string, torch::nn::AnyModule> blocks;
    for (int64_t i = 0; i < c.layers; ++i) {
      blocks.insert("encoder_layer_" + std::to_string(i),
                    torch::nn::AnyModule(EncoderBlock(c.heads, c.hidden, c.mlp, dropout)));
    }
    layers_ = register_module("layers", torch::nn::Sequential(std::move(blocks)));
    ln_ = register_module("ln",
                          torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden}).eps(1e-6)));
  }

  torch::Tensor forward(torch::Tensor x) {
    return ln_->forward(layers_->forward(dropout_->forward(x + pos_embedding_)));
  }

 private:
  torch::Tensor pos_embedding_;
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Sequential layers_{nullptr};
  torch::nn::LayerNorm ln_{nullptr};
};
TORCH_MODULE(Encoder);

class VisionTransformer : public Classifier {
 public:
  VisionTransformer(const VitConfig& c, const ModelOptions& opts) : hidden_(c.hidden) {
    image_size_ = opts.image_size > 0 ? opts.image_size : 224;
    if (image_size_ % c.patch != 0) {
      throw Exception(Code::kInvalidArgument,
                      std::string(c.name) + " needs an image size divisible by its patch size " +
                          std::to_string(c.patch) + ", got " + std::to_string(image_size_),
                      "use a multiple of " + std::to_string(c.patch) + ", e.g. " +
                          std::to_string((image_size_ / c.patch + 1) * c.patch));
    }
    const double dropout = opts.dropout >= 0 ? opts.dropout : 0.0;
    const int64_t seq_length = (image_size_ / c.patch) * (image_size_ / c.patch) + 1;

    class_token_ = register_parameter("class_token", torch::zeros({1, 1, c.hidden}));
    conv_proj_ = register_module(
        "conv_proj",
        torch::nn::Conv2d(torch::nn::Conv2dOptions(3, c.hidden, c.patch).stride(c.patch)));
    encoder_ = register_module("encoder", Encoder(c, seq_length, dropout));
    torch::OrderedDict<std::string, torch::nn::AnyModule> heads;
    head_ = torch::nn::Linear(c.hidden, opts.num_classes);
    heads.insert("head", torch::nn::AnyModule(head_));
    heads_ = register_module("heads", torch::nn::Sequential(std::move(heads)));

    // torchvision: truncated normal patch projection (std 1/sqrt(fan_in)), zero head.
    torch::NoGradGuard no_grad;
    trunc_normal(conv_proj_->weight, std::sqrt(1.0 / static_cast<double>(3 * c.patch * c.patch)));
    conv_proj_->bias.zero_();
    head_->weight.zero_();
    head_->bias.zero_();
  }

  torch::Tensor forward(torch::Tensor x) override {
    if (x.dim() != 4 || x.size(2) != image_size_ || x.size(3) != image_size_) {
      throw Exception(Code::kInvalidArgument,
                      "this ViT was built for " + std::to_string(image_size_) + "x" +
                          std::to_string(image_size_) + " images, got shape " + c10::str(x.sizes()),
                      "build the model with the image size of the data");
    }
    const int64_t n = x.size(0);
    x = conv_proj_->forward(x).reshape({n, hidden_, -1}).permute({0, 2, 1});
    x = torch::cat({class_token_.expand({n, -1, -1}), x}, 1);
    x = encoder_->forward(x);
    return heads_->forward(x.select(1, 0));
  }

 private:
  int64_t hidden_, image_size_ = 224;
  torch::Tensor class_token_;
  torch::nn::Conv2d conv_proj_{nullptr};
  Encoder encoder_{nullptr};
  torch::nn::Linear head_{nullptr};
  torch::nn::Sequential heads_{nullptr};
};

}  // namespace

void add_vit_models(std::vector<ModelInfo>& table) {
  static const VitConfig kConfigs[] = {
      {"vit_b_16", 16, 12, 12, 768, 3072},
      {"vit_b_32", 32, 12, 12, 768, 3072},
      {"vit_l_16", 16, 24, 16, 1024, 4096},
  };
  for (const auto& c : kConfigs) {
    ModelInfo info;
    info.name = c.name;
    info.family = "vit";
    info.default_image_size = 224;
    info.min_image_size = c.patch;
    info.image_size_fixed = true;
    info.make = [&c](const ModelOptions& opts) -> ClassifierPtr {
      return std::make_shared<VisionTransformer>(c, opts);
    };
    table.push_back(std::move(info));
  }
}

}  // namespace gpulab::train
