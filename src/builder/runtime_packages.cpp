// Maps a binary's direct library dependencies to Debian packages (only the NEEDED entries: apt
// resolves the rest, and a short list is what a user can read in the image), and lists the
// libraries it loads that no package owns (see runtime_packages.h).
#include "builder/runtime_packages.h"

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

Result<RuntimeFiles> runtime_files(const std::vector<fs::path>& binaries) {
  if (!run_process({"dpkg", "--version"}).ok()) {
    return Error{Code::kUnavailable, "dpkg is not on this host: the cpu lab image needs it",
                 "build the cpu image on a Debian or Ubuntu host"};
  }
  // The union over the binaries first, so that dpkg is asked once per library they share.
  std::set<std::string> needed;
  std::map<std::string, std::string> paths;
  for (const auto& binary : binaries) {
    auto n = needed_libraries(binary);
    if (!n.ok()) return n.error();
    auto p = resolved_paths(binary);
    if (!p.ok()) return p.error();
    for (const auto& lib : *n) {
      if (p->find(lib) == p->end()) {
        return Error{Code::kNotFound, "library " + lib + " of " + binary.string() + " is not found",
                     "fix the library path before building an image"};
      }
    }
    needed.insert(n->begin(), n->end());
    paths.insert(p->begin(), p->end());
  }
  std::set<std::string> packages;
  RuntimeFiles files;
  for (const auto& [soname, path] : paths) {
    std::string pkg = owning_package(path);
    if (!pkg.empty()) {
      if (needed.count(soname) != 0) packages.insert(pkg);
      continue;
    }
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);  // the file, not a link to it
    files.libraries.push_back({soname, ec ? fs::path(path) : real});
  }
  files.packages.assign(packages.begin(), packages.end());
  return files;
}

}  // namespace gpulab::builder
