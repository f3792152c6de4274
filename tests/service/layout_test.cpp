// The layout of src/service holds: folders include only folders below them (docs/engines.md), and
// only engine/'s Docker adapter names Docker; in all of src/ and apps/, only src/docker and that
// adapter drive docker::Client (gpulab ddp and image build go through docker/lab_engine.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <initializer_list>
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

// Every .h and .cpp below `dirs` (relative to the source tree), by path relative to `base`.
std::map<std::string, std::string> sources_below(const fs::path& base,
                                                 std::initializer_list<const char*> dirs) {
  std::map<std::string, std::string> out;
  for (const char* dir : dirs)
    for (const auto& e : fs::recursive_directory_iterator(base / dir)) {
      auto ext = e.path().extension();
      if (ext != ".h" && ext != ".cpp") continue;
      std::ifstream in(e.path());
      std::stringstream text;
      text << in.rdbuf();
      out[fs::relative(e.path(), base).string()] = text.str();
    }
  return out;
}

std::map<std::string, std::string> service_sources() {  // relative to src/service
  return sources_below(fs::path(GPULAB_SOURCE_DIR) / "src" / "service", {"."});
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

// Every .h and .cpp under src/ and apps/, by path relative to the source tree.
std::map<std::string, std::string> product_sources() {
  return sources_below(fs::path(GPULAB_SOURCE_DIR), {"src", "apps"});
}

TEST(Layout, OnlyTheDockerEngineAdapterUsesTheDockerClient) {
  auto sources = product_sources();
  ASSERT_GT(sources.size(), 200u);
  int users = 0;
  for (const auto& [path, text] : sources) {
    const bool uses = text.find("docker::Client") != std::string::npos ||
                      text.find("#include \"docker/client.h\"") != std::string::npos;
    if (!uses) continue;
    ++users;
    const bool allowed =
        path.rfind("src/docker/", 0) == 0 || path.rfind("src/service/engine/docker_engine", 0) == 0;
    EXPECT_TRUE(allowed) << path
                         << " drives docker::Client: go through the Docker engine adapter "
                            "(docker/lab_engine.h, or the service's Engine)";
  }
  EXPECT_GT(users, 0) << "the scan found no user at all: is GPULAB_SOURCE_DIR right?";
}

}  // namespace
