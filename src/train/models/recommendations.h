// The recommended hyperparameters that the seed's `ddp-training.py --show_recommendations`
// prints ("Model Recommendations"), and the row that applies to any model of the zoo.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpulab::train {

struct Recommendation {
  std::string use_case;  // "For Quick Testing", ...
  std::string model;     // the seed's model name (may be an alias: vit_base_patch16_224)
  double learning_rate = 0;
  std::string optimizer;
  int64_t batch_size = 0;
  std::optional<int64_t> num_epochs;
  std::optional<double> weight_decay;
  std::optional<std::string> normalize;
  // The seed's argument string: "--model resnet18 --learning_rate 0.001 ...".
  std::string args() const;
};

// The seed's four rows, in the seed's order.
const std::vector<Recommendation>& recommendations();

// The row for a model: the seed's own row when it names the model (aliases resolved), else the
// row its family follows (ResNet/VGG/DenseNet: SGD rows; EfficientNet/MobileNet/ConvNeXt: the
// "Large Models" AdamW row; ViT: the Vision Transformer row), with `model` set to `name`.
// *from_seed tells which of the two it was.
Recommendation recommendation_for(std::string_view name, std::string_view family,
                                  bool* from_seed = nullptr);

}  // namespace gpulab::train
