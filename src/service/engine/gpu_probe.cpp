// The probe script, and a probe's tar turned into a host's inventory (gpu_probe.h).
#include "service/engine/gpu_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/strings.h"
#include "core/tar.h"
#include "gpu/detect.h"

namespace gpulab::service {

namespace fs = std::filesystem;

// The files are those the backends read from a captured tree (tests/fixtures/gpu-hosts.md):
// nvidia_procfs, amdgpu_sysfs with the KFD topology, and nvidia-smi's XML when the tool is there.
// Each is copied with cat: sysfs reports 4096 bytes for every attribute, so an archive of /sys
// itself would carry padded or cut files. Links in /sys are followed by the reads themselves.
const std::string& gpu_probe_script() {
  static const std::string script = R"SH(set -u
H=/host
O=/gpulab-probe/tree
mkdir -p "$O" || exit 3
c() {
  for f in "$@"; do
    [ -f "$f" ] || continue
    t="$O${f#"$H"}"
    mkdir -p "${t%/*}" && cat "$f" >"$t" 2>/dev/null || rm -f "$t"
  done
}
c "$H/proc/driver/nvidia/version"
for g in "$H"/proc/driver/nvidia/gpus/*; do
  c "$g/information" "$H/sys/bus/pci/devices/${g##*/}/numa_node"
done
for k in "$H"/sys/class/drm/card* "$H"/sys/class/drm/renderD*; do
  case "${k##*/}" in card*-*) continue ;; esac
  c "$k/dev"
  for a in vendor device revision uevent product_name product_number serial_number unique_id \
    mem_info_vram_total current_compute_partition available_compute_partition \
    current_memory_partition available_memory_partition numa_node; do
    c "$k/device/$a"
  done
done
for n in "$H"/sys/class/kfd/kfd/topology/nodes/*; do
  c "$n/properties" "$n/gpu_id" "$n/name" "$n"/io_links/*/properties "$n"/p2p_links/*/properties
done
c "$H/sys/class/kfd/kfd/topology/system_properties" "$H/sys/class/kfd/kfd/topology/generation_id"
c "$H/sys/module/amdgpu/version" "$H/opt/rocm/.info/version"
if command -v nvidia-smi >/dev/null 2>&1; then
  mkdir -p "$O/commands"
  x="$O/commands/nvidia-smi-q-x.xml"
  nvidia-smi -q -x >"$x" 2>/dev/null || rm -f "$x"
fi
echo "gpulab-probe: done"
)SH";
  return script;
}

namespace {

Error refused(const std::string& why) {
  return Error(Code::kDataError, "GPU probe answer refused: " + why,
               "the host's probe container sent something other than a tree of kernel files; "
               "check probe_image and probe_root of that host");
}

Status write_new_file(const fs::path& path, const std::string& data) {
  // O_EXCL and O_NOFOLLOW: a name given twice, or anything already there, is refused.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return refused("cannot create " + path.string() + ": " + std::strerror(errno));
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return Error(Code::kInternal, "write " + path.string() + ": " + std::strerror(errno));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
  return ok_status();
}

// One entry of the archive placed under dest (its top folder dropped).
class TreeWriter {
 public:
  TreeWriter(const fs::path& dest, const ProbeTreeLimits& limits) : dest_(dest), limits_(limits) {}

  Status add(const TarEntry& e, const TarReader::EntryData& data) {
    if (++entries_ > limits_.max_entries)
      return refused("more than " + std::to_string(limits_.max_entries) + " entries");
    const auto named = tar_member_parts(e.name);
    if (!named) return refused("entry name '" + printable(e.name) + "'");
    const std::vector<std::string>& parts = *named;
    if (static_cast<int>(parts.size()) > limits_.max_depth)
      return refused("entry '" + printable(e.name) + "' is too deep");
    if (top_.empty()) top_ = parts.front();
    if (parts.front() != top_) return refused("a second top folder '" + parts.front() + "'");
    fs::path rel;
    for (size_t i = 1; i < parts.size(); ++i) rel /= parts[i];
    if (e.type == TarType::kDirectory) return make_dirs(rel);
    if (e.type != TarType::kFile || rel.empty())
      return refused("entry '" + printable(e.name) + "' is not a plain file or folder");
    if (e.size < 0 || e.size > limits_.max_file_bytes)
      return refused("file '" + printable(e.name) + "' is larger than " +
                     std::to_string(limits_.max_file_bytes) + " bytes");
    if (auto st = make_dirs(rel.parent_path()); !st) return st;
    auto text = data.read(limits_.max_file_bytes);
    if (!text) return text.error();
    return write_new_file(dest_ / rel, *text);
  }

 private:
  // Folders are made here, never taken from the archive as they are: none can be a link.
  Status make_dirs(const fs::path& rel) {
    fs::path at = dest_;
    for (const auto& part : rel) {
      at /= part;
      std::error_code ec;
      if (fs::create_directory(at, ec)) {
        fs::permissions(at, fs::perms::owner_all, ec);
        continue;
      }
      if (ec || !fs::is_directory(fs::symlink_status(at, ec)))
        return refused("'" + rel.string() + "' is both a file and a folder");
    }
    return ok_status();
  }

  fs::path dest_;
  ProbeTreeLimits limits_;
  std::string top_;
  int entries_ = 0;
};

}  // namespace

Status unpack_probe_tree(std::string_view tar, const fs::path& dest,
                         const ProbeTreeLimits& limits) {
  if (static_cast<std::int64_t>(tar.size()) > limits.max_archive_bytes)
    return refused("archive larger than " + std::to_string(limits.max_archive_bytes) + " bytes");
  if (tar.empty()) return refused("an empty answer");
  std::size_t pos = 0;
  TarInput in;
  in.what = "(GPU probe answer)";
  in.size = static_cast<std::int64_t>(tar.size());
  in.read = [&](char* buf, std::size_t n) {
    if (n > tar.size() - pos) return false;
    std::memcpy(buf, tar.data() + pos, n);
    pos += n;
    return true;
  };
  in.skip = [&](std::int64_t n) {
    if (n < 0 || static_cast<std::uint64_t>(n) > tar.size() - pos) return false;
    pos += static_cast<std::size_t>(n);
    return true;
  };
  TreeWriter writer(dest, limits);
  Status failed = ok_status();
  auto st = TarReader::for_each(in, [&](const TarEntry& e, const TarReader::EntryData& data) {
    failed = writer.add(e, data);
    return failed.ok();
  });
  if (!failed) return failed;
  if (!st) return refused(st.error().message);
  return ok_status();
}

Result<ServiceInventory> inventory_from_probe(std::string_view tar, const std::string& host,
                                              const ProbeTreeLimits& limits) {
  // A folder of our own (0700, fresh name): the tree is read from nowhere else.
  std::string tmpl = (fs::temp_directory_path() / "gpulab-probe-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    return Error(Code::kInternal,
                 "GPU probe: cannot make a temporary folder: " + std::string(std::strerror(errno)));
  const fs::path dir = tmpl;
  auto cleanup = [&dir] {
    std::error_code ec;
    fs::remove_all(dir, ec);
  };
  if (auto st = unpack_probe_tree(tar, dir, limits); !st) {
    cleanup();
    return st.error();
  }
  gpu::DetectOptions opts;
  opts.root = dir;
  opts.host_checks = false;
  opts.processes = false;
  ServiceInventory inv = inventory_from_detected(gpu::detect(opts), dir, host);
  cleanup();
  return inv;
}

}  // namespace gpulab::service
