// Maps a binary's direct library dependencies to Debian packages. Only the NEEDED entries are
// mapped: apt resolves the rest, and a short list is what a user can read in the image.
#include "builder/runtime_packages.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/strings.h"
#include "core/subprocess.h"

namespace gpulab::builder {

namespace fs = std::filesystem;

namespace {

Result<std::vector<std::string>> needed_libraries(const fs::path& binary) {
  auto r = run_process({"readelf", "-d", binary.string()});
  if (!r.ok() || !r->success()) {
    return Error{Code::kUnavailable, "cannot read the dynamic section of " + binary.string(),
                 "install binutils (readelf)"};
  }
  std::vector<std::string> libs;
  for (const auto& line : split(r->out, '\n')) {
    if (line.find("(NEEDED)") == std::string::npos) continue;
    size_t a = line.find('['), b = line.find(']');
    if (a != std::string::npos && b != std::string::npos && b > a)
      libs.push_back(line.substr(a + 1, b - a - 1));
  }
  return libs;
}

Result<std::map<std::string, std::string>> resolved_paths(const fs::path& binary) {
  auto r = run_process({"ldd", binary.string()});
  if (!r.ok() || !r->success()) {
    return Error{Code::kUnavailable, "ldd failed on " + binary.string()};
  }
  std::map<std::string, std::string> paths;
  for (const auto& line : split(r->out, '\n')) {
    auto parts = split(trim(line), ' ');
    if (parts.size() >= 3 && parts[1] == "=>") paths[parts[0]] = parts[2];
  }
  return paths;
}

// dpkg knows a file by the path its package installed; with merged /usr that may be either form.
std::string owning_package(const std::string& path) {
  std::error_code ec;
  std::string real = fs::canonical(path, ec).string();
  std::vector<std::string> forms = {path, real};
  for (const auto& p : std::vector<std::string>(forms)) {
    if (starts_with(p, "/usr/lib/")) forms.push_back(p.substr(4));
    if (starts_with(p, "/lib/")) forms.push_back("/usr" + p);
  }
  for (const auto& f : forms) {
    auto r = run_process({"dpkg", "-S", f});
    if (r.ok() && r->success()) {
      std::string first = split(r->out, '\n').front();
      std::string pkg = first.substr(0, first.find(':'));
      if (!pkg.empty()) return pkg;
    }
  }
  return {};
}

}  // namespace

Result<std::vector<std::string>> runtime_packages(const fs::path& binary) {
  auto needed = needed_libraries(binary);
  if (!needed.ok()) return needed.error();
  auto paths = resolved_paths(binary);
  if (!paths.ok()) return paths.error();
  std::set<std::string> packages;
  for (const auto& lib : *needed) {
    auto it = paths->find(lib);
    if (it == paths->end()) {
      return Error{Code::kNotFound, "library " + lib + " of " + binary.string() + " is not found",
                   "fix the library path before building an image"};
    }
    std::string pkg = owning_package(it->second);
    if (pkg.empty()) {
      return Error{Code::kUnsupported, "library " + it->second + " belongs to no Debian package",
                   "build gpulab against Debian's packages to put it in the cpu lab image"};
    }
    packages.insert(pkg);
  }
  return std::vector<std::string>(packages.begin(), packages.end());
}

}  // namespace gpulab::builder
