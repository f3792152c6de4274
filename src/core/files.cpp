// File helpers: whole-file reads, crash-safe atomic writes and executable lookups.
#include "core/files.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"

namespace gpulab {

Result<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return Error{Code::kNotFound, "cannot open " + path.string() + ": " + std::strerror(errno)};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Error{Code::kDataError, "cannot read " + path.string()};
  return ss.str();
}

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() &&
         (s.back() == '\n' || s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.pop_back();
  return s;
}

Status write_file_atomic(const fs::path& path, std::string_view data) {
  auto file = AtomicFile::create(path, data.size());  // a full disk fails before a byte is written
  if (!file) return file.error();
  if (Status st = file->write(data); !st) return st;
  return file->commit();  // a file left uncommitted removes its temporary
}

std::optional<fs::path> find_executable(const std::vector<fs::path>& candidates) {
  for (const auto& c : candidates) {
    if (::access(c.c_str(), X_OK) == 0 && !fs::is_directory(c)) return c;
  }
  return std::nullopt;
}

std::optional<fs::path> which(std::string_view program) {
  const char* path_env = std::getenv("PATH");
  if (path_env == nullptr) return std::nullopt;
  std::string_view rest(path_env);
  std::vector<fs::path> candidates;
  while (!rest.empty()) {
    size_t colon = rest.find(':');
    std::string_view dir = rest.substr(0, colon);
    if (!dir.empty()) candidates.push_back(fs::path(dir) / program);
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return find_executable(candidates);
}

fs::path under_root(const fs::path& root, const fs::path& absolute) {
  if (root.empty() || root == "/") return absolute;
  return root / absolute.relative_path();
}

}  // namespace gpulab
