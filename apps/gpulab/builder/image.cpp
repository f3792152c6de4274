// `gpulab image build`: builds the nvidia/rocm/cpu lab images through the Docker Engine API.
#include <iostream>
#include <memory>

#include "builder/image_build.h"
#include "commands.h"

namespace gpulab::cli {

void add_image_command(CLI::App& app, CommandContext& /*ctx*/) {
  auto* image = app.add_subcommand("image", "lab images: build");
  image->require_subcommand(1);
  auto opts = std::make_shared<builder::ImageBuildOptions>();
  auto* build =
      image->add_subcommand("build", "detect the GPUs and build a ready-to-use lab image");
  build->add_option("--vendor", opts->vendor, "auto, nvidia, rocm or cpu")
      ->check(CLI::IsMember({"auto", "nvidia", "rocm", "cpu"}))
      ->capture_default_str();
  build->add_option("--base", opts->base, "base image (default: the recipe's)");
  build->add_option("--tag", opts->tag, "image tag (default: nvidia-lab, rocm-lab, cpu-lab)");
  build->add_flag("-y,--yes", opts->yes, "build without asking");
  build->add_option("--docker_host,--docker-host", opts->docker_host,
                    "engine URL (default: $DOCKER_HOST)");
  build->add_option("--recipes", opts->recipes, "folder with the recipes (images/)");
  build->add_option("--detect_root,--detect-root", opts->detect_root,
                    "captured tree for GPU detection");
  build->add_flag("--quiet_build,--quiet-build", opts->quiet_build,
                  "don't echo the engine's build output");
  build->callback([opts] { builder::build_lab_images(*opts, std::cin, std::cout); });
}

}  // namespace gpulab::cli
