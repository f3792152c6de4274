// Dependencies inside src/ point one way: no two units (a .h with its .cpp) include each other,
// in any module. A pair that did was split into a third header both include.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

namespace fs = std::filesystem;

TEST(IncludeGraph, NoTwoUnitsIncludeEachOther) {
  const fs::path src = fs::path(GPULAB_SOURCE_DIR) / "src";
  static const std::regex include_re(R"(#include "([^"]+)\.h")");
  std::map<std::string, std::set<std::string>> includes;  // "launch/launcher" -> units
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    const auto ext = e.path().extension();
    if (ext != ".h" && ext != ".cpp") continue;
    std::string unit = fs::relative(e.path(), src).replace_extension().string();
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (std::sregex_iterator it(s.begin(), s.end(), include_re), end; it != end; ++it)
      if ((*it)[1] != unit) includes[unit].insert((*it)[1]);
  }
  ASSERT_GT(includes.size(), 200u);
  int pairs = 0;
  for (const auto& [a, targets] : includes)
    for (const auto& b : targets)
      if (a < b && includes.count(b) && includes.at(b).count(a)) {
        ++pairs;
        ADD_FAILURE() << a << " and " << b << " include each other";
      }
  EXPECT_EQ(pairs, 0);
}

}  // namespace
