// The model registry: one explicit table of every model (name -> factory), the seed's aliases,
// and the checks that turn a bad name or size into a clear error.
#include "train/models/registry.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/strings.h"

namespace gpulab::train {
namespace {

// Seed and timm-style names users already type; a fixed size comes with the ViT ones.
struct Alias {
  const char* alias;
  const char* name;
  int64_t image_size;  // 0: no size implied
};
constexpr Alias kAliases[] = {
    {"vit_base_patch16_224", "vit_b_16", 224},  {"vit_base_patch32_224", "vit_b_32", 224},
    {"vit_large_patch16_224", "vit_l_16", 224}, {"vit_base_patch16_384", "vit_b_16", 384},
    {"vit_large_patch16_384", "vit_l_16", 384}, {"resnext50", "resnext50_32x4d", 0},
    {"wide_resnet50", "wide_resnet50_2", 0},
};

std::vector<ModelInfo> build_table() {
  std::vector<ModelInfo> table;
  // The order here is the order `gpulab models` prints.
  add_resnet_models(table);
  add_efficientnet_models(table);
  add_vit_models(table);
  add_densenet_models(table);
  add_vgg_models(table);
  add_mobilenet_models(table);
  add_convnext_models(table);
  return table;
}

// Names are matched case-insensitively, with '-' and '_' the same.
std::string normalize(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (c == '-') c = '_';
  }
  return out;
}

}  // namespace

const std::vector<ModelInfo>& model_table() {
  static const std::vector<ModelInfo> table = build_table();
  return table;
}

Result<const ModelInfo*> find_model(std::string_view name, int64_t* alias_image_size) {
  const std::string key = normalize(name);
  std::string target = key;
  int64_t implied_size = 0;
  for (const Alias& a : kAliases) {
    if (key == a.alias) {
      target = a.name;
      implied_size = a.image_size;
    }
  }
  for (const ModelInfo& info : model_table()) {
    if (info.name == target) {
      if (implied_size > 0 && alias_image_size != nullptr) *alias_image_size = implied_size;
      return &info;
    }
  }
  std::vector<std::string> all;
  for (const ModelInfo& info : model_table()) all.push_back(info.name);
  const std::string names = join(all, ", ");
  const std::string closest = closest_name(key, all, 3);  // near misses only
  std::string hint = "valid models: " + names + "; see `gpulab models`";
  if (!closest.empty()) hint = "did you mean " + closest + "? " + hint;
  return Error{Code::kInvalidArgument, "unknown model '" + std::string(name) + "'", hint};
}

ClassifierPtr create_model(std::string_view name, ModelOptions opts) {
  int64_t alias_size = 0;
  const ModelInfo* info = find_model(name, &alias_size).value_or_throw();
  if (opts.num_classes < 1) {
    throw Exception(Code::kInvalidArgument,
                    "num_classes must be at least 1, got " + std::to_string(opts.num_classes));
  }
  if (alias_size > 0) {
    if (opts.image_size > 0 && opts.image_size != alias_size) {
      throw Exception(
          Code::kInvalidArgument,
          std::string(name) + " is " + info->name + " at " + std::to_string(alias_size) +
              " px, but image size " + std::to_string(opts.image_size) + " was asked for",
          "use " + info->name + " with --image_size " + std::to_string(opts.image_size));
    }
    opts.image_size = alias_size;
  }
  if (opts.image_size != 0 && opts.image_size < info->min_image_size) {
    throw Exception(Code::kInvalidArgument, info->name + " needs images of at least " +
                                                std::to_string(info->min_image_size) + " px, got " +
                                                std::to_string(opts.image_size));
  }
  return info->make(opts);
}

}  // namespace gpulab::train
