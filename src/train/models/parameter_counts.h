// Parameter counts of the image models without building them, so `gpulab models` answers at once:
// each model's count is its backbone plus one linear head, body + (head_inputs + 1) x classes.
// Header only: a table of numbers, no libtorch (and no new unit in the train library's batches).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

namespace gpulab::train {

struct ListedParameters {
  std::string_view model;   // the registry's name
  int64_t body = 0;         // every parameter but the classifier head's, at the default image size
  int64_t head_inputs = 0;  // the head's input features (weight head_inputs x classes, bias)
};

// body = the count at 1 class minus the head's (head_inputs + 1); read off torchvision 0.29's
// models at 1 and 1000 classes, then checked against ours by the ModelZoo tests.
inline constexpr std::array<ListedParameters, 36> kListedParameters = {{
    {"resnet18", 11176512, 512},
    {"resnet34", 21284672, 512},
    {"resnet50", 23508032, 2048},
    {"resnet101", 42500160, 2048},
    {"resnet152", 58143808, 2048},
    {"resnext50_32x4d", 22979904, 2048},
    {"wide_resnet50_2", 66834240, 2048},
    {"efficientnet_b0", 4007548, 1280},
    {"efficientnet_b1", 6513184, 1280},
    {"efficientnet_b2", 7700994, 1408},
    {"efficientnet_b3", 10696232, 1536},
    {"efficientnet_b4", 17548616, 1792},
    {"efficientnet_b5", 28340784, 2048},
    {"efficientnet_b6", 40735704, 2304},
    {"efficientnet_b7", 63786960, 2560},
    {"vit_b_16", 85798656, 768},
    {"vit_b_32", 87455232, 768},
    {"vit_l_16", 303301632, 1024},
    {"densenet121", 6953856, 1024},
    {"densenet161", 26472000, 2208},
    {"densenet169", 12484480, 1664},
    {"densenet201", 18092928, 1920},
    {"vgg11", 128766336, 4096},
    {"vgg13", 128950848, 4096},
    {"vgg16", 134260544, 4096},
    {"vgg19", 139570240, 4096},
    {"vgg11_bn", 128771840, 4096},
    {"vgg13_bn", 128956736, 4096},
    {"vgg16_bn", 134268992, 4096},
    {"vgg19_bn", 139581248, 4096},
    {"mobilenet_v2", 2223872, 1280},
    {"mobilenet_v3_large", 4202032, 1280},
    {"mobilenet_v3_small", 1517856, 1024},
    {"convnext_tiny", 27820128, 768},
    {"convnext_small", 49454688, 768},
    {"convnext_base", 87566464, 1024},
}};

// The model's parameter count at its default image size for num_classes classes; nullopt for a
// model the table does not list (the caller then counts a built model). ModelZoo tests check
// every row against built models: ours at 1000 and 7 classes, torchvision's at 1000 and 100.
constexpr std::optional<int64_t> listed_parameters(std::string_view model, int64_t num_classes) {
  for (const auto& row : kListedParameters)
    if (row.model == model) return row.body + (row.head_inputs + 1) * num_classes;
  return std::nullopt;
}

}  // namespace gpulab::train
