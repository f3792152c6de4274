// Builds the optimizer named by --optimizer with two parameter groups: weights that decay, and
// norms and biases (parameters with dim <= 1) with weight_decay 0, as common recipes do.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

#include "train/train_options.h"

namespace gpulab::train {

struct OptimizerSpec {
  std::string name = "sgd";  // sgd | adam | adamw | rmsprop
  double lr = 0.001;
  double weight_decay = 0;
  double momentum = 0.9;  // sgd, rmsprop
  bool nesterov = false;  // sgd
  bool fused = true;      // sgd: one pass per parameter (optim/fused_sgd.h), same numbers
};

OptimizerSpec optimizer_spec(const TrainOptions& opts);

// Whether `model`'s parameter `name` takes weight decay: matrices do; biases and norm scales
// (dim <= 1) do not, nor a language model's lookup tables, which its family's traits name
// (DecoderTraits::token_embedding: Llama's and Qwen2's embed_tokens, GPT-2's wte; and
// DecoderTraits::position_embedding: GPT-2's wpe).
bool takes_weight_decay(const torch::nn::Module& model, const std::string& name,
                        const torch::Tensor& p);

// Group 0 holds the parameters that take weight decay, group 1 the others.
// Parameters that do not require gradients are left out.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& spec,
                                                        torch::nn::Module& model);

// The same optimizer over explicit groups (sharded data parallel steps flat shards).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const OptimizerSpec& spec,
                                                        std::vector<torch::Tensor> decay,
                                                        std::vector<torch::Tensor> no_decay);

// Sets the learning rate of every group.
void set_learning_rate(torch::optim::Optimizer& opt, double lr);
double learning_rate(const torch::optim::Optimizer& opt);

}  // namespace gpulab::train
