// Assembles a recipe's build context as a tar: the recipe's files, and what it needs from the
// running gpulab (its binary and runtime package list, or its source tree).
#pragma once

#include <filesystem>

#include "builder/recipe.h"
#include "core/result.h"

namespace gpulab::builder {

// Writes the context of `recipe` (files under `images`) to `out_tar`.
Status write_build_context(const Recipe& recipe, const std::filesystem::path& images,
                           const std::filesystem::path& out_tar);

}  // namespace gpulab::builder
