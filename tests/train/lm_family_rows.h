// The rows of the family test suites: one small shape per language-model family, taken from the
// table `gpulab models` lists (each family's "-tiny" shape), so a family added there with its
// tiny shape gets every TEST_P instantiated over these rows.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "train/models/decoder_config.h"

namespace gpulab::train::testing {

// The "-tiny" shape of each family in decoder_shapes(), in the table's order; a family without
// one is a row named after the family with an empty shape, which the suites fail on.
inline std::vector<std::pair<std::string, std::string>> family_rows() {
  std::vector<std::pair<std::string, std::string>> rows;  // family, tiny shape name
  for (const auto& c : decoder_shapes()) {
    bool seen = false;
    for (const auto& r : rows) seen = seen || r.first == c.family;
    if (!seen) rows.emplace_back(c.family, "");
  }
  for (auto& [family, tiny] : rows)
    for (const auto& c : decoder_shapes())
      if (c.family == family && c.name.size() > 5 && c.name.ends_with("-tiny")) tiny = c.name;
  return rows;
}

// The row's name in the test's name: the family.
inline std::string family_row_name(
    const ::testing::TestParamInfo<std::pair<std::string, std::string>>& info) {
  return info.param.first;
}

}  // namespace gpulab::train::testing
