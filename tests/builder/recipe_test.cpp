// The lab image recipes: the three vendors and their aliases, the seed's launch lines, and the
// files a build context needs, checked against the images/ folder of this source tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "builder/recipe.h"

namespace gpulab::builder {
namespace {

namespace fs = std::filesystem;

TEST(Recipe, ThreeVendorsWithTheSeedsAliases) {
  std::set<std::string> vendors;
  for (const auto& r : recipes()) vendors.insert(r.vendor);
  EXPECT_EQ(vendors, (std::set<std::string>{"nvidia", "rocm", "cpu"}));
  EXPECT_EQ(find_recipe("AMD").value_or_throw()->vendor, "rocm");
  EXPECT_EQ(find_recipe("cuda").value_or_throw()->vendor, "nvidia");
  EXPECT_EQ(find_recipe("cpu").value_or_throw()->tag, "cpu-lab");
  auto bad = find_recipe("tpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
  EXPECT_NE(bad.error().hint.find("nvidia, rocm, cpu"), std::string::npos);
}

TEST(Recipe, LaunchLinesGiveEachVendorItsDevices) {
  const std::string rocm = find_recipe("rocm").value_or_throw()->launch_command("rocm-lab:1");
  EXPECT_NE(rocm.find("--device=/dev/kfd --device=/dev/dri --group-add video"), std::string::npos)
      << rocm;
  EXPECT_NE(rocm.find("rocm-lab:1 bash"), std::string::npos) << rocm;
  const std::string nv = find_recipe("nvidia").value_or_throw()->launch_command("nv:2");
  EXPECT_NE(nv.find("--gpus all"), std::string::npos) << nv;
  const std::string cpu = find_recipe("cpu").value_or_throw()->launch_command("c:3");
  EXPECT_EQ(cpu.find("--gpus"), std::string::npos) << cpu;
  EXPECT_EQ(cpu.find("/dev/"), std::string::npos) << cpu;
}

TEST(Recipe, TheSourceTreeHoldsEveryContextFile) {
  const fs::path images = fs::path(GPULAB_SOURCE_DIR) / "images";
  EXPECT_EQ(images_dir(images).value_or_throw(), images);
  for (const auto& r : recipes()) {
    ASSERT_FALSE(r.files.empty()) << r.vendor;
    EXPECT_TRUE(missing_files(r, images).empty()) << r.vendor;
  }
}

TEST(Recipe, AnEmptyFolderMissesEveryFileByName) {
  const fs::path empty = fs::temp_directory_path() / "gpulab-recipe-empty";
  fs::create_directories(empty);
  auto not_images = images_dir(empty);
  ASSERT_FALSE(not_images.ok());
  EXPECT_EQ(not_images.error().code, Code::kNotFound);
  const Recipe& cpu = *find_recipe("cpu").value_or_throw();
  const auto missing = missing_files(cpu, empty);
  EXPECT_GE(missing.size(), cpu.files.size());
  for (const auto& f : cpu.files)
    EXPECT_NE(std::find(missing.begin(), missing.end(), "images/" + f.recipe_path), missing.end())
        << f.recipe_path;
  fs::remove_all(empty);
}

}  // namespace
}  // namespace gpulab::builder
