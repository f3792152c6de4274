// `gpulab image build`: the seed's create_image.sh flow — check the engine, detect the vendor
// (menu when both are present), show the plan, confirm, check the recipe files, build with the
// output streamed, tag, and print how to start the image.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::builder {

struct ImageBuildOptions {
  std::string vendor = "auto";        // auto | nvidia | rocm | cpu
  std::string base;                   // overrides the recipe's default base image
  std::string tag;                    // overrides the recipe's tag ("cpu-lab"); ":latest" is added
  bool yes = false;                   // -y: no confirmation
  std::string docker_host;            // empty: $DOCKER_HOST or the default socket
  std::filesystem::path recipes;      // the images/ folder; empty: found automatically
  std::filesystem::path detect_root;  // a captured tree for vendor detection (tests)
  bool quiet_build = false;           // don't echo the engine's build output
};

struct BuiltImage {
  std::string vendor, image, image_id, launch_command;
};

// Runs the whole flow, talking to the user on `in`/`out`. Throws gpulab::Exception for what
// stops it (engine down -> kUnavailable, missing files -> kNotFound, cancelled ->
// kInvalidArgument).
std::vector<BuiltImage> build_lab_images(const ImageBuildOptions& opts, std::istream& in,
                                         std::ostream& out);

}  // namespace gpulab::builder
