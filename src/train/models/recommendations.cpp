// The seed's "Model Recommendations" table and the family defaults derived from it.
#include "train/models/recommendations.h"

#include <sstream>

#include "train/models/registry.h"

namespace gpulab::train {
namespace {

// Shortest decimal that reads back the same ("0.001", "1e-05" -> "1e-05").
std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The model a seed row names, as a registry name (aliases resolved).
std::string canonical(std::string_view name) {
  auto found = find_model(name);
  return found.ok() ? (*found)->name : std::string(name);
}

}  // namespace

std::string Recommendation::args() const {
  std::string s = "--model " + model + " --learning_rate " + number(learning_rate) +
                  " --optimizer " + optimizer + " --batch_size " + std::to_string(batch_size);
  if (num_epochs) s += " --num_epochs " + std::to_string(*num_epochs);
  if (weight_decay) s += " --weight_decay " + number(*weight_decay);
  if (normalize) s += " --normalize " + *normalize;
  return s;
}

const std::vector<Recommendation>& recommendations() {
  static const std::vector<Recommendation> rows = {
      {"For Quick Testing", "resnet18", 0.001, "sgd", 256, 10, std::nullopt, std::nullopt},
      {"For Best Performance", "resnet101", 0.002, "sgd", 1024, 100, std::nullopt, "neg_one_one"},
      {"For Large Models", "efficientnet_b0", 0.001, "adamw", 256, std::nullopt, 1e-5,
       std::nullopt},
      {"For Vision Transformers", "vit_base_patch16_224", 0.0001, "adamw", 128, std::nullopt, 0.05,
       std::nullopt},
  };
  return rows;
}

Recommendation recommendation_for(std::string_view name, std::string_view family, bool* from_seed) {
  const auto& rows = recommendations();
  const std::string target = canonical(name);
  for (const auto& row : rows) {
    if (canonical(row.model) == target) {
      if (from_seed) *from_seed = true;
      return row;
    }
  }
  if (from_seed) *from_seed = false;
  // Convolutional nets with BatchNorm train well with the seed's SGD settings; the depthwise
  // families follow the seed's AdamW row, and transformers the ViT row.
  const Recommendation* base = &rows[0];
  if (family == "efficientnet" || family == "mobilenet" || family == "convnext") base = &rows[2];
  if (family == "vit") base = &rows[3];
  Recommendation r = *base;
  r.model = std::string(name);
  return r;
}

}  // namespace gpulab::train
