// Exports a trained model's parameters and buffers (torchvision names, i.e. its state_dict) as
// a .safetensors file, written atomically, for PyTorch, torchvision and other tools to load.
#pragma once

#include <torch/torch.h>

#include <filesystem>

namespace gpulab::train {

void export_weights(torch::nn::Module& model, const std::filesystem::path& file);

}  // namespace gpulab::train
