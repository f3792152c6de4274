// Shared wording for data-set errors, so every source says the same thing the same way: the
// seed's "Training data not found in ./data directory" plus the command that fetches the data.
#pragma once

#include <filesystem>
#include <string>

namespace gpulab::train {

// The `gpulab data get` line for a set (empty for sets that cannot be fetched).
std::string fetch_hint(const std::string& dataset, const std::string& data_dir);

// kNotFound: "Training data not found in <dir> directory (<detail>)".
[[noreturn]] void throw_data_missing(const std::string& dataset, const std::string& data_dir,
                                     const std::string& detail);
// kDataError: "<file> is truncated or corrupt: <detail>", hint to fetch again.
[[noreturn]] void throw_data_corrupt(const std::string& dataset, const std::string& data_dir,
                                     const std::filesystem::path& file, const std::string& detail);

}  // namespace gpulab::train
