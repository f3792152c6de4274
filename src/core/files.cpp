// File helpers: whole-file reads, crash-safe atomic writes and executable lookups.
#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

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

namespace {

Status write_all(int fd, std::string_view data, const fs::path& tmp) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{Code::kUnavailable, "write " + tmp.string() + ": " + std::strerror(errno)};
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return ok_status();
}

}  // namespace

Status write_file_atomic(const fs::path& path, std::string_view data) {
  fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::random_device rd;
  // Appended piecewise: `"." + string` trips a GCC 12 -Wrestrict false positive at -O3.
  std::string name = ".";
  name += path.filename().string();
  name += ".tmp";
  name += std::to_string(rd());
  const fs::path tmp = dir / name;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Error{Code::kUnavailable, "cannot create " + tmp.string() + ": " + std::strerror(errno)};
  }
  Status st = write_all(fd, data, tmp);
  if (st.ok() && ::fsync(fd) != 0) {
    st = Error{Code::kUnavailable, "fsync " + tmp.string() + ": " + std::strerror(errno)};
  }
  ::close(fd);
  if (!st.ok()) {
    fs::remove(tmp, ec);
    return st;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    fs::remove(tmp, ec);
    return Error{Code::kUnavailable, "rename to " + path.string() + ": " + std::strerror(e)};
  }
  // The rename is durable only once the folder entry is on disk.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ok_status();
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
