// The base of every model in the zoo: a torch::nn::Module mapping N×3×H×W images to N×classes
// logits, with torchvision's parameter and buffer names.
#pragma once

#include <torch/torch.h>

namespace gpulab::train {

class Classifier : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

using ClassifierPtr = std::shared_ptr<Classifier>;

}  // namespace gpulab::train
