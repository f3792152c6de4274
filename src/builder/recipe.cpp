// The recipe table and the lookup of the images folder.
#include "builder/recipe.h"

#include <unistd.h>

#include <cstdlib>

#include "core/strings.h"

namespace gpulab::builder {

namespace fs = std::filesystem;

std::string Recipe::launch_command(const std::string& image) const {
  const std::string name = tag + "_container";
  if (vendor == "rocm") {
    return "docker run --device=/dev/kfd --device=/dev/dri --group-add video -it --name " + name +
           " " + image + " bash";
  }
  if (vendor == "nvidia") return "docker run --gpus all -it --name " + name + " " + image + " bash";
  return "docker run -it --name " + name + " " + image + " bash";
}

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> table = {
      {"nvidia",
       "NVIDIA",
       "nvidia-lab",
       "nvidia/cuda:12.4.0-runtime-ubuntu22.04",
       "PyTorch (CUDA), gpulab, SSH service, nvidia-smi and nvtop",
       {{"Dockerfile", "nvidia/Dockerfile"}, {"entrypoint.sh", "common/entrypoint.sh"}},
       /*needs_source_tree=*/true,
       /*needs_binary=*/false},
      {"rocm",
       "ROCm",
       "rocm-lab",
       "rocm/pytorch:latest",
       "PyTorch (ROCm), gpulab, SSH service, rocm-smi",
       {{"Dockerfile", "rocm/Dockerfile"}, {"entrypoint.sh", "common/entrypoint.sh"}},
       /*needs_source_tree=*/true,
       /*needs_binary=*/false},
      {"cpu",
       "CPU",
       "cpu-lab",
       "debian:12",
       "gpulab (CPU training, GEMM test), SSH service",
       {{"Dockerfile", "cpu/Dockerfile"},
        {"entrypoint.sh", "common/entrypoint.sh"},
        {"install-packages.sh", "common/install-packages.sh"}},
       /*needs_source_tree=*/false,
       /*needs_binary=*/true},
  };
  return table;
}

Result<const Recipe*> find_recipe(std::string_view vendor) {
  std::string v = to_lower(vendor);
  if (v == "amd") v = "rocm";
  if (v == "cuda") v = "nvidia";
  for (const auto& r : recipes()) {
    if (r.vendor == v) return &r;
  }
  return Error{Code::kInvalidArgument, "unknown vendor '" + std::string(vendor) + "'",
               "valid values: auto, nvidia, rocm, cpu"};
}

namespace {

fs::path self_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

bool looks_like_images_dir(const fs::path& d) {
  std::error_code ec;
  return fs::is_directory(d / "common", ec) && fs::is_directory(d / "cpu", ec);
}

}  // namespace

Result<fs::path> images_dir(const fs::path& explicit_dir) {
  std::vector<fs::path> candidates;
  if (!explicit_dir.empty()) {
    if (!looks_like_images_dir(explicit_dir)) {
      return Error{Code::kNotFound, "no lab image recipes in " + explicit_dir.string(),
                   "point --recipes at the images/ folder of gpulab"};
    }
    return explicit_dir;
  }
  if (const char* env = std::getenv("GPULAB_IMAGES_DIR")) candidates.emplace_back(env);
  fs::path here = self_dir();
  if (!here.empty()) {
    candidates.push_back(here / ".." / "share" / "gpulab" / "images");
    candidates.push_back(here / ".." / "images");
  }
  candidates.emplace_back(fs::path(GPULAB_SOURCE_DIR) / "images");
  for (const auto& c : candidates) {
    if (looks_like_images_dir(c)) return fs::weakly_canonical(c);
  }
  return Error{Code::kNotFound, "cannot find gpulab's lab image recipes (images/)",
               "pass --recipes DIR or set GPULAB_IMAGES_DIR"};
}

std::vector<std::string> missing_files(const Recipe& recipe, const fs::path& dir) {
  std::vector<std::string> missing;
  std::error_code ec;
  for (const auto& f : recipe.files) {
    if (!fs::is_regular_file(dir / f.recipe_path, ec)) missing.push_back("images/" + f.recipe_path);
  }
  if (recipe.needs_source_tree) {
    const fs::path src = dir / "..";
    for (const char* p : {"CMakeLists.txt", "cmake", "src", "apps"}) {
      if (!fs::exists(src / p, ec)) missing.push_back(std::string("source tree: ") + p);
    }
  }
  return missing;
}

}  // namespace gpulab::builder
