// The model registry: one explicit table of name -> factory, filled by one function per family
// (models/<family>.cpp), plus the seed's aliases (vit_base_patch16_224 -> vit_b_16 at 224).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "train/models/classifier.h"

namespace gpulab::train {

struct ModelOptions {
  int64_t num_classes = 1000;
  int64_t image_size = 0;        // 0: the model's default; ViT builds its position table for it
  double dropout = -1;           // < 0: torchvision's default for the variant
  double stochastic_depth = -1;  // < 0: torchvision's default (EfficientNet, ConvNeXt)
};

struct ModelInfo {
  std::string name;    // torchvision's name: "resnet50"
  std::string family;  // "resnet", "efficientnet", "vit", ...
  int64_t default_image_size = 224;
  int64_t min_image_size = 32;    // smallest input the architecture accepts
  bool image_size_fixed = false;  // true when the weights depend on it (ViT position embeddings)
  std::function<ClassifierPtr(const ModelOptions&)> make;
};

// Every family registers its models here; the table order is the order `gpulab models` prints.
void add_resnet_models(std::vector<ModelInfo>& table);
void add_vgg_models(std::vector<ModelInfo>& table);
void add_densenet_models(std::vector<ModelInfo>& table);
void add_efficientnet_models(std::vector<ModelInfo>& table);
void add_mobilenet_models(std::vector<ModelInfo>& table);
void add_vit_models(std::vector<ModelInfo>& table);
void add_convnext_models(std::vector<ModelInfo>& table);

const std::vector<ModelInfo>& model_table();

// Resolves a name or a seed alias. An alias may fix the image size (vit_base_patch16_224 -> 224);
// then *alias_image_size is set, otherwise left alone. Unknown names list the valid ones.
Result<const ModelInfo*> find_model(std::string_view name, int64_t* alias_image_size = nullptr);

// Builds a model; throws gpulab::Exception (kInvalidArgument) for unknown names or sizes.
ClassifierPtr create_model(std::string_view name, ModelOptions opts = {});

}  // namespace gpulab::train
