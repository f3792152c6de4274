// The layout of src/service holds: folders include only folders below them (docs/engines.md), and
// only engine/'s Docker adapter names Docker.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Top to bottom; "" is src/service itself (the embedded dashboard files: a leaf).
const std::vector<std::string> kLevels = {"app",    "api",   "web",    "ops",  "http",
                                          "engine", "store", "domain", "base", ""};

int level_of(const std::string& folder) {
  for (std::size_t i = 0; i < kLevels.size(); ++i)
    if (kLevels[i] == folder) return static_cast<int>(i);
  return -1;
}

std::string folder_of(const std::string& rel) {  // "ops/service.h" -> "ops"; "x.h" -> ""
  auto slash = rel.find('/');
  return slash == std::string::npos ? std::string() : rel.substr(0, slash);
}

std::map<std::string, std::string> service_sources() {
  std::map<std::string, std::string> out;  // path relative to src/service -> text
  fs::path root = fs::path(GPULAB_SOURCE_DIR) / "src" / "service";
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    auto ext = e.path().extension();
    if (ext != ".h" && ext != ".cpp") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    out[fs::relative(e.path(), root).string()] = text.str();
  }
  return out;
}

TEST(Layout, FoldersIncludeOnlyFoldersBelow) {
  static const std::regex include_re(R"(#include "service/([^"]+)\")");
  auto sources = service_sources();
  ASSERT_GT(sources.size(), 50u);
  for (const auto& [path, text] : sources) {
    std::string from = folder_of(path);
    ASSERT_GE(level_of(from), 0) << path << ": a folder missing from kLevels and docs/engines.md";
    for (std::sregex_iterator it(text.begin(), text.end(), include_re), end; it != end; ++it) {
      std::string to = folder_of((*it)[1]);
      if (to == from) continue;
      EXPECT_LT(level_of(from), level_of(to)) << path << " includes " << (*it)[1];
    }
  }
}

TEST(Layout, OnlyTheDockerAdapterNamesDocker) {
  auto sources = service_sources();
  for (const auto& [path, text] : sources) {
    if (path.rfind("engine/docker_", 0) == 0) continue;
    EXPECT_EQ(text.find("#include \"docker/"), std::string::npos) << path;
    EXPECT_EQ(text.find("docker::"), std::string::npos) << path;
  }
}

}  // namespace
