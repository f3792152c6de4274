// ViT's image-size rules: the size must be a multiple of the patch, the position table is sized
// for it, and an input of another size is refused with a clear error instead of a shape crash.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/error.h"
#include "train/models/registry.h"

namespace gpulab::train {
namespace {

ModelOptions with_size(int64_t size) {
  ModelOptions o;
  o.num_classes = 3;
  o.image_size = size;
  return o;
}

TEST(Vit, RejectsImageSizeNotDivisibleByPatch) {
  for (auto [name, size] : {std::pair{"vit_b_16", 40}, {"vit_b_32", 48}, {"vit_l_16", 230}}) {
    try {
      create_model(name, with_size(size));
      ADD_FAILURE() << name << " accepted image size " << size;
    } catch (const Exception& e) {
      EXPECT_EQ(e.code(), Code::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("divisible"), std::string::npos) << e.what();
      EXPECT_FALSE(e.hint().empty());
    }
  }
}

TEST(Vit, PositionTableHasOneRowPerPatchPlusClassToken) {
  const ModelInfo* info = find_model("vit_b_32").value();
  EXPECT_TRUE(info->image_size_fixed);
  EXPECT_EQ(info->min_image_size, 32);
  for (int64_t size : {32, 96}) {
    auto model = create_model("vit_b_32", with_size(size));
    const int64_t side = size / 32;
    auto params = model->named_parameters();
    EXPECT_EQ(params["encoder.pos_embedding"].sizes(),
              (std::vector<int64_t>{1, side * side + 1, 768}));
    EXPECT_EQ(params["class_token"].sizes(), (std::vector<int64_t>{1, 1, 768}));
    torch::NoGradGuard no_grad;
    model->eval();
    EXPECT_EQ(model->forward(torch::randn({2, 3, size, size})).sizes(),
              (std::vector<int64_t>{2, 3}));
  }
}

TEST(Vit, RefusesInputOfAnotherSize) {
  auto model = create_model("vit_b_32", with_size(64));
  torch::NoGradGuard no_grad;
  model->eval();
  EXPECT_THROW(model->forward(torch::randn({1, 3, 96, 96})), Exception);
  EXPECT_THROW(model->forward(torch::randn({1, 3, 64, 32})), Exception);
}

}  // namespace
}  // namespace gpulab::train
