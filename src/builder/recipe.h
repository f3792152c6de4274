// The lab image recipes (nvidia-lab, rocm-lab, cpu-lab): where each recipe's files live, what
// its build context needs, its default base, and the command that starts the built image.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::builder {

struct ContextFile {
  std::string context_name;  // name inside the build context ("Dockerfile", "entrypoint.sh")
  std::string recipe_path;   // path relative to the images folder ("cpu/Dockerfile")
};

struct Recipe {
  std::string vendor;        // "nvidia", "rocm", "cpu"
  std::string title;         // "NVIDIA", "ROCm", "CPU"
  std::string tag;           // "nvidia-lab"
  std::string default_base;  // the seed's bases; Debian 12 for cpu
  std::string includes;      // one line for the plan the user confirms
  std::vector<ContextFile> files;
  bool needs_source_tree = false;  // GPU recipes compile gpulab inside against the image's torch
  bool needs_binary = false;       // cpu copies the running gpulab and its package list in

  // The seed's "Launch command:" line for an image of this recipe.
  std::string launch_command(const std::string& image) const;
};

const std::vector<Recipe>& recipes();
Result<const Recipe*> find_recipe(std::string_view vendor);

// The folder holding the recipes: `explicit_dir` if given, else $GPULAB_IMAGES_DIR, else next to
// the binary (../share/gpulab/images, ../images), else the source tree this binary was built from.
Result<std::filesystem::path> images_dir(const std::filesystem::path& explicit_dir = {});

// Files of `recipe` missing under `dir` (relative names, as the user should see them), plus the
// source tree's entries when the recipe needs it.
std::vector<std::string> missing_files(const Recipe& recipe, const std::filesystem::path& dir);

}  // namespace gpulab::builder
