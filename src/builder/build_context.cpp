// Build context assembly through the Docker client's tar writer.
#include "builder/build_context.h"

#include <string>
#include <utility>
#include <vector>

#include "builder/runtime_packages.h"
#include "core/strings.h"
#include "core/tar.h"

namespace gpulab::builder {

namespace fs = std::filesystem;

namespace {

// gpulab as bin/gpulab and, beside it, its libtorch half as bin/gpulab-torch (apps/gpulab).
std::vector<std::pair<std::string, fs::path>> lab_binaries(const fs::path& self) {
  std::vector<std::pair<std::string, fs::path>> out{{"bin/gpulab", self}};
  const fs::path half = self.parent_path() / "gpulab-torch";
  std::error_code ec;
  if (self.filename() != half.filename() && fs::exists(half, ec))
    out.emplace_back("bin/gpulab-torch", half);
  return out;
}

}  // namespace

Status write_build_context(const Recipe& recipe, const fs::path& images, const fs::path& out_tar) {
  auto writer = TarWriter::create(out_tar);
  if (!writer.ok()) return writer.error();
  auto& tar = *writer;
  for (const auto& f : recipe.files) {
    if (auto st = tar.add_path(f.context_name, images / f.recipe_path); !st.ok()) return st;
  }
  if (recipe.needs_binary) {
    std::error_code ec;
    fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) return Error{Code::kInternal, "cannot locate the running gpulab binary"};
    const auto binaries = lab_binaries(self);
    std::vector<fs::path> paths;
    for (const auto& b : binaries) paths.push_back(b.second);
    auto files = runtime_files(paths);
    if (!files.ok()) return files.error();
    std::vector<std::string> lines = files->packages;
    lines.push_back("openssh-server");
    std::string list =
        "# Debian packages gpulab links against, and sshd\n" + join(lines, "\n") + "\n";
    if (auto st = tar.add_file("runtime-packages.txt", list); !st.ok()) return st;
    for (const auto& [name, path] : binaries)
      if (auto st = tar.add_path(name, path); !st.ok()) return st;
    // The libraries no package owns (the wheel's libtorch and what it loads) go to lib/, which
    // the image puts on the loader's path; the folder is there even when it holds nothing else.
    if (auto st = tar.add_file("lib/README", "libraries of gpulab that no Debian package has\n");
        !st.ok())
      return st;
    for (const auto& lib : files->libraries) {
      if (auto st = tar.add_path("lib/" + lib.soname, lib.path); !st.ok()) return st;
    }
  }
  if (recipe.needs_source_tree) {
    const fs::path src = images / "..";
    for (const char* p : {"CMakeLists.txt", "Makefile", "cmake", "src", "apps"}) {
      if (!fs::exists(src / p)) continue;
      Status st = fs::is_directory(src / p) ? tar.add_tree(src / p, std::string("source/") + p)
                                            : tar.add_path(std::string("source/") + p, src / p);
      if (!st.ok()) return st;
    }
  }
  return tar.finish();
}

}  // namespace gpulab::builder
