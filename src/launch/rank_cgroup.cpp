// Rank cgroups with a memory cap: finding the launcher's memory controller (v2, else v1) from
// /proc/self/cgroup and /proc/self/mountinfo, creating one cgroup per rank, reading back OOM
// kills and peaks, and removing everything at the end.
#include "launch/rank_cgroup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/files.h"
#include "core/strings.h"

namespace gpulab::launch {

namespace fs = std::filesystem;

Result<int64_t> parse_memory_size(const std::string& text) {
  std::string num = trim(text);
  std::string unit;
  while (!num.empty() && std::isalpha(static_cast<unsigned char>(num.back()))) {
    unit.insert(unit.begin(),
                static_cast<char>(std::tolower(static_cast<unsigned char>(num.back()))));
    num.pop_back();
  }
  // "m", "mb", "mib" all mean MiB: a cgroup limit is counted in pages, binary units throughout.
  if (unit.size() == 3 && unit.substr(1) == "ib") unit.resize(1);
  if (unit.size() == 2 && unit[1] == 'b') unit.resize(1);
  double mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  if (unit == "k") mult = 1024.0;
  if (unit == "m") mult = 1024.0 * 1024;
  if (unit == "g") mult = 1024.0 * 1024 * 1024;
  if (unit == "t") mult = 1024.0 * 1024 * 1024 * 1024;
  double n = -1;
  char* end = nullptr;
  if (!num.empty()) n = std::strtod(num.c_str(), &end);
  const bool whole = end != nullptr && *end == '\0';
  const double bytes = n * mult;
  if (mult == 0 || !whole || !(n > 0) || bytes < 16.0 * (1 << 20) || bytes > 64.0 * (1ull << 40)) {
    return Error{Code::kInvalidArgument,
                 "'" + text + "' is not a memory size of at least 16M and at most 64T",
                 "give a size with a binary unit, e.g. 300M or 2G"};
  }
  return static_cast<int64_t>(bytes);
}

std::string format_mib(int64_t bytes) {
  char buf[48];
  const double mib = static_cast<double>(bytes) / (1 << 20);
  if (mib >= 1024)
    std::snprintf(buf, sizeof buf, "%.3g GiB", mib / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.0f MiB", mib);
  return buf;
}

namespace {

// 0 or the errno of writing `text` to a cgroup file (the kernel's answer is in errno: EBUSY,
// EINVAL... which a stream would hide).
int write_control(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int e = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : EIO);
  ::close(fd);
  return e;
}

std::string why(int e) {
  return std::strerror(e);
}

bool has_word(const std::string& list, const std::string& word) {
  for (const auto& w : split(list, ' '))
    if (trim(w) == word) return true;
  return false;
}

// "key value" lines (memory.events, memory.oom_control): the value of `key`, or 0.
int64_t keyed_value(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string k;
  int64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

struct Mount {
  std::string root;   // the hierarchy's folder mounted there
  std::string point;  // where
};

// The cgroup2 mount (controllers empty) or the v1 mount that holds `controller`.
std::optional<Mount> find_mount(const std::string& controller) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    auto fields = split(line, ' ');
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 5 || dash + 3 > fields.size()) continue;
    const std::string& type = fields[dash + 1];
    const std::string& super = fields[dash + 3];
    const bool match = controller.empty()
                           ? type == "cgroup2"
                           : type == "cgroup" && has_word(join(split(super, ','), " "), controller);
    if (match) return Mount{fields[3], fields[4]};
  }
  return std::nullopt;
}

// This process's cgroup in the hierarchy of `controller` ("" for v2's "0::" line).
std::optional<std::string> own_cgroup(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string ctrls = line.substr(a + 1, b - a - 1);
    const bool match = controller.empty() ? line.substr(0, a) == "0" && ctrls.empty()
                                          : has_word(join(split(ctrls, ','), " "), controller);
    if (match) return line.substr(b + 1);
  }
  return std::nullopt;
}

// The folder of this process's cgroup, when the mount shows the part of the hierarchy it is in.
std::optional<std::string> own_folder(const std::string& controller) {
  auto m = find_mount(controller);
  auto path = own_cgroup(controller);
  if (!m || !path) return std::nullopt;
  std::string rel = *path;
  if (m->root != "/") {
    if (!starts_with(rel, m->root)) return std::nullopt;
    rel = rel.substr(m->root.size());
  }
  std::string dir = m->point + (rel == "/" ? "" : rel);
  if (!fs::is_directory(dir)) return std::nullopt;
  return dir;
}

std::string launch_name() {
  return "gpulab-launch-" + std::to_string(::getpid());
}

// rmdir, retried briefly: a cgroup stays busy for a moment after its last process was reaped.
void remove_cgroup(const std::string& dir) {
  for (int i = 0; i < 100; ++i) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return;
    if (errno != EBUSY) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

// The launcher's cgroup holds processes. When the launcher is the only one, it moves itself to a
// leaf beside its ranks' folder (undone at the end) and enables the controller again: 0, an errno,
// or -1 with the reason in `reasons` when other processes share the cgroup.
int RankCgroups::enable_from_leaf(const std::string& base, const std::string& subtree,
                                  std::vector<std::string>& reasons) {
  auto procs = split(trim(read_text(base + "/cgroup.procs").value_or("")), '\n');
  if (procs.size() != 1 || trim(procs[0]) != std::to_string(::getpid())) {
    reasons.push_back("cgroup v2: the launcher's cgroup " + base + " holds " +
                      std::to_string(procs.size()) +
                      " processes, so it cannot hand the memory controller to the ranks' cgroups "
                      "(cgroups with processes have no controlled children)");
    return -1;
  }
  int e = EBUSY;
  leaf_ = base + "/gpulab-launcher-" + std::to_string(::getpid());
  if (::mkdir(leaf_.c_str(), 0755) != 0 && errno != EEXIST) e = errno;
  if (e == EBUSY) e = write_control(leaf_ + "/cgroup.procs", "0");
  if (e == 0) e = write_control(subtree, "+memory");
  if (e == EBUSY) e = EIO;  // still refused: say so rather than loop
  return e;
}

Result<std::unique_ptr<RankCgroups>> RankCgroups::create(int64_t max_bytes) {
  std::unique_ptr<RankCgroups> cg(new RankCgroups());
  cg->max_bytes_ = max_bytes;
  std::vector<std::string> reasons;

  // cgroup v2: the memory controller must be available to the launcher's cgroup and handed on
  // to its children (cgroup.subtree_control), which a cgroup holding processes cannot do.
  if (auto dir = own_folder("")) {
    const std::string base = *dir;
    const auto controllers = read_text(base + "/cgroup.controllers").value_or("");
    if (!has_word(trim(controllers), "memory")) {
      reasons.push_back("cgroup v2 at " + base + " has no memory controller (cgroup.controllers: " +
                        (trim(controllers).empty() ? "none" : trim(controllers)) + ")");
    } else {
      cg->version_ = 2;
      cg->base_ = base;
      const std::string subtree = base + "/cgroup.subtree_control";
      if (!has_word(trim(read_text(subtree).value_or("")), "memory")) {
        int e = write_control(subtree, "+memory");
        if (e == EBUSY) e = cg->enable_from_leaf(base, subtree, reasons);
        if (e == 0) {
          cg->enabled_memory_ = true;
        } else if (e > 0) {
          reasons.push_back("cgroup v2: cannot enable the memory controller in " + subtree + ": " +
                            why(e));
        }
        if (e != 0) {
          cg.reset();  // undoes the move to the leaf, if any
          cg.reset(new RankCgroups());
          cg->max_bytes_ = max_bytes;
        }
      }
      if (cg->base_ == base) {
        cg->launch_ = base + "/" + launch_name();
        int e = ::mkdir(cg->launch_.c_str(), 0755) == 0 ? 0 : errno;
        if (e == 0) e = write_control(cg->launch_ + "/cgroup.subtree_control", "+memory");
        if (e == 0) return cg;
        reasons.push_back("cgroup v2: cannot create " + cg->launch_ + ": " + why(e));
        cg.reset();
        cg.reset(new RankCgroups());
        cg->max_bytes_ = max_bytes;
      }
    }
  } else {
    reasons.push_back("no cgroup v2 hierarchy mounted for this process");
  }

  // cgroup v1: any cgroup of the memory hierarchy can have children with their own limits.
  if (auto dir = own_folder("memory")) {
    cg->version_ = 1;
    cg->base_ = *dir;
    cg->launch_ = *dir + "/" + launch_name();
    if (::mkdir(cg->launch_.c_str(), 0755) == 0) return cg;
    reasons.push_back("cgroup v1: cannot create " + cg->launch_ + ": " + why(errno));
    cg->launch_.clear();
  } else {
    reasons.push_back("no cgroup v1 memory hierarchy mounted for this process");
  }
  return Error{Code::kUnavailable,
               "--rank_memory_max needs a cgroup memory controller this launcher can write to: " +
                   join(reasons, "; "),
               "run as root (or with a delegated cgroup, e.g. `systemd-run --scope -p "
               "Delegate=yes gpulab ...`), or drop --rank_memory_max"};
}

RankCgroups::~RankCgroups() {
  std::error_code ec;
  if (!launch_.empty()) {
    for (const auto& e : fs::directory_iterator(launch_, ec))
      if (e.is_directory() && starts_with(e.path().filename().string(), "rank"))
        remove_cgroup(e.path().string());
    remove_cgroup(launch_);
  }
  if (!leaf_.empty()) {
    // Back where the launcher started, and the cgroup as it was (a cgroup with controllers on
    // for its children refuses processes).
    if (enabled_memory_) (void)write_control(base_ + "/cgroup.subtree_control", "-memory");
    (void)write_control(base_ + "/cgroup.procs", "0");
    remove_cgroup(leaf_);
  }
}

std::string RankCgroups::rank_dir(int rank) const {
  return launch_ + "/rank" + std::to_string(rank);
}

Result<std::string> RankCgroups::prepare(int rank) {
  const std::string dir = rank_dir(rank);
  release(rank);
  if (::mkdir(dir.c_str(), 0755) != 0)
    return Error{Code::kUnavailable, "cannot create the cgroup " + dir + ": " + why(errno)};
  const std::string bytes = std::to_string(max_bytes_);
  int e = 0;
  if (version_ == 2) {
    e = write_control(dir + "/memory.max", bytes);
    // Swap would let a rank go past its cap slowly instead of failing at it.
    if (e == 0 && fs::exists(dir + "/memory.swap.max"))
      e = write_control(dir + "/memory.swap.max", "0");
    // A rank's helper processes (if any) go with it: the rank is the unit that fails.
    if (e == 0 && fs::exists(dir + "/memory.oom.group"))
      e = write_control(dir + "/memory.oom.group", "1");
  } else {
    e = write_control(dir + "/memory.limit_in_bytes", bytes);
    // With swap accounting on, memory + swap gets the same cap (it must be set after the other).
    if (e == 0 && fs::exists(dir + "/memory.memsw.limit_in_bytes"))
      e = write_control(dir + "/memory.memsw.limit_in_bytes", bytes);
  }
  if (e != 0) {
    release(rank);
    return Error{Code::kUnavailable,
                 "cannot set the memory cap of the cgroup " + dir + " to " + bytes + ": " + why(e)};
  }
  return dir + "/cgroup.procs";
}

void RankCgroups::release(int rank) {
  remove_cgroup(rank_dir(rank));
}

int64_t RankCgroups::oom_kills(int rank) const {
  return version_ == 2 ? keyed_value(rank_dir(rank) + "/memory.events", "oom_kill")
                       : keyed_value(rank_dir(rank) + "/memory.oom_control", "oom_kill");
}

std::optional<int64_t> RankCgroups::peak_bytes(int rank) const {
  auto text =
      read_text(rank_dir(rank) + (version_ == 2 ? "/memory.peak" : "/memory.max_usage_in_bytes"));
  if (!text) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(text->c_str(), &end, 10);
  if (end == text->c_str()) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string RankCgroups::describe() const {
  return "cgroup v" + std::to_string(version_) + " memory controller, under " + launch_;
}

}  // namespace gpulab::launch
