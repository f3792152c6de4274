// Parameter counts of the image models without building them, so `gpulab models` answers at once:
// each model's count is its backbone plus one linear head, body + (head_inputs + 1) x classes.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gpulab::train {

struct ListedParameters {
  std::string_view model;   // the registry's name
  int64_t body = 0;         // every parameter but the classifier head's, at the default image size
  int64_t head_inputs = 0;  // the head's input features (weight head_inputs x classes, bias)
};

// The model's parameter count at its default image size for num_classes classes; nullopt for a
// model the table does not list (the caller then counts a built model). ModelZoo tests check
// every row against built models: ours at 1000 classes, torchvision's at 1000 and 100.
std::optional<int64_t> listed_parameters(std::string_view model, int64_t num_classes);

}  // namespace gpulab::train
