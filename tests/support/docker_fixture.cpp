// Real-dockerd harness: starts engines through start-dockerd.sh, connects clients, and builds
// the local test images (busybox from the host's static binary; Debian + sshd from debootstrap).
#include "support/docker_fixture.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/files.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "core/tar.h"

namespace gpulab::testing {

namespace fs = std::filesystem;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

// Runs start-dockerd.sh; exit 77 means "cannot run here" (kUnsupported: tests skip).
Result<TestEngine> start_engine(const std::string& name) {
  auto script = dockerd_script("start-dockerd.sh");
  RunOptions opts;
  opts.timeout = std::chrono::seconds(180);
  auto r = run_process({"/bin/bash", script.string(), name}, opts);
  if (!r.ok()) return r.error();
  if (r->exit_code == 77)
    return Error(Code::kUnsupported, "no test Docker engine: " + trim(r->err));
  if (!r->success())
    return Error(Code::kUnavailable, "start-dockerd.sh " + name + " failed: " + trim(r->err),
                 "see /tmp/gpulab-dockerd-" + name + "/dockerd.log");
  auto lines = split(trim(r->out), '\n');
  TestEngine e;
  e.name = name;
  e.host = lines.empty() ? "" : trim(lines.back());
  e.root = "/tmp/gpulab-dockerd-" + name;
  e.socket_path = starts_with(e.host, "unix://") ? e.host.substr(7) : e.host;
  return e;
}

Result<TestEngine> cached(std::once_flag& once, std::optional<Result<TestEngine>>& slot,
                          const std::function<Result<TestEngine>()>& make) {
  std::call_once(once, [&] { slot = make(); });
  return *slot;
}

}  // namespace

fs::path dockerd_script(const std::string& script) {
  return fs::path(GPULAB_SOURCE_DIR) / "tests/integration/dockerd" / script;
}

Result<TestEngine> main_engine() {
  static std::once_flag once;
  static std::optional<Result<TestEngine>> slot;
  return cached(once, slot, []() -> Result<TestEngine> {
    std::string external = env_or("GPULAB_TEST_DOCKER_HOST", "");
    if (external.empty()) return start_engine(env_or("GPULAB_TEST_DOCKER_NAME", "main"));
    auto ep = docker::Endpoint::parse(external);
    if (!ep.ok()) return ep.error();
    TestEngine e;
    e.name = "external";
    e.host = ep->to_string();
    e.socket_path = ep->socket_path;
    e.external = true;
    return e;
  });
}

Result<TestEngine> peer_engine() {
  static std::once_flag once;
  static std::optional<Result<TestEngine>> slot;
  return cached(once, slot,
                [] { return start_engine(env_or("GPULAB_TEST_DOCKER_PEER_NAME", "peer")); });
}

Result<docker::Client> client_for(const TestEngine& engine) {
  auto ep = docker::Endpoint::parse(engine.host);
  if (!ep.ok()) return ep.error();
  return docker::Client::connect(*ep);
}

Status ensure_busybox_image(const docker::Client& client) {
  if (client.image_exists(kBusyboxImage)) return ok_status();
  // A static busybox is the whole root filesystem; each applet is a symlink to it.
  auto busybox = find_executable({"/bin/busybox", "/usr/bin/busybox"});
  if (!busybox)
    return Error(Code::kUnsupported, "no /bin/busybox", "apt-get install busybox-static");
  auto applets = run_process({busybox->string(), "--list-full"});
  if (!applets.ok() || !applets->success())
    return Error(Code::kUnsupported,
                 busybox->string() + " --list-full failed (not busybox-static?)");
  fs::path tar_path =
      fs::temp_directory_path() / ("gpulab-busybox-" + std::to_string(::getpid()) + ".tar");
  auto w = TarWriter::create(tar_path);
  if (!w.ok()) return w.error();
  for (const char* d : {"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "root", "proc", "sys",
                        "dev", "var", "var/www", "run"})
    if (auto s = w->add_directory(d); !s.ok()) return s;
  if (auto s = w->add_directory("tmp", 01777); !s.ok()) return s;
  if (auto s = w->add_path("bin/busybox", *busybox); !s.ok()) return s;
  for (const auto& applet : split(applets->out, '\n')) {
    std::string a = trim(applet);
    if (a.empty() || a == "bin/busybox") continue;
    int depth = static_cast<int>(std::count(a.begin(), a.end(), '/'));
    std::string target;
    for (int i = 0; i < depth; ++i) target += "../";
    if (auto s = w->add_symlink(a, target + "bin/busybox"); !s.ok()) return s;
  }
  (void)w->add_file("etc/passwd",
                    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n");
  (void)w->add_file("etc/group", "root:x:0:\nnogroup:x:65534:\n");
  (void)w->add_file("var/www/index.html", "gpulab busybox test image\n");
  if (auto s = w->finish(); !s.ok()) return s;
  docker::ImportSpec spec;
  spec.rootfs_tar = tar_path;
  spec.repo = "gpulab-test/busybox";
  spec.tag = "latest";
  spec.message = "gpulab test image: static busybox";
  spec.changes = {"CMD [\"/bin/sh\"]", "ENV PATH=/bin:/sbin:/usr/bin:/usr/sbin"};
  auto id = client.import_image(spec);
  std::error_code ec;
  fs::remove(tar_path, ec);
  if (!id.ok()) return id.error();
  return ok_status();
}

Result<fs::path> debian_ssh_rootfs_tar() {
  RunOptions opts;
  opts.timeout = std::chrono::minutes(20);
  auto r = run_process({"/bin/bash", dockerd_script("build-debian-rootfs.sh").string()}, opts);
  if (!r.ok()) return r.error();
  if (!r->success())
    return Error(Code::kUnavailable, "build-debian-rootfs.sh failed: " + trim(r->err),
                 "it needs root, debootstrap and the Debian mirror");
  auto lines = split(trim(r->out), '\n');
  if (lines.empty()) return Error(Code::kInternal, "build-debian-rootfs.sh printed no path");
  return fs::path(trim(lines.back()));
}

Status ensure_debian_ssh_image(const docker::Client& client) {
  if (client.image_exists(kDebianSshImage)) return ok_status();
  auto tar = debian_ssh_rootfs_tar();
  if (!tar.ok()) return tar.error();
  docker::ImportSpec spec;
  spec.rootfs_tar = *tar;
  spec.repo = "gpulab-test/debian-ssh";
  spec.tag = "latest";
  spec.message = "gpulab test image: Debian 12 minbase + openssh-server (root password root)";
  spec.changes = {
      "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "ENV LANG=C.UTF-8",
      "EXPOSE 22",
      // Host keys are made per container, at its first start.
      "CMD [\"/bin/sh\", \"-c\", \"ssh-keygen -A >/dev/null && mkdir -p /run/sshd && exec "
      "/usr/sbin/sshd -D -e\"]",
  };
  auto id = client.import_image(spec);
  if (!id.ok()) return id.error();
  return ok_status();
}

std::string unique_name(const std::string& prefix) {
  static std::atomic<int> counter{0};
  return "gpulab-t-" + prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

int unique_port_base() {
  // 22 blocks of 1100 ports in 7000-31199: above the seed walkthrough's fixed ports (3002-6002,
  // SSH 3311/3322) and below Linux's ephemeral range (32768-60999), where
  // the tests' own HTTP connections (thousands in the soak, TIME_WAIT for 60 s) made a
  // container's host port "already in use" now and then. A block is held with an flock on its
  // lock file for the life of the process, so tests running at once (ctest --parallel) never
  // share one; the pid only picks where the search starts.
  constexpr int kBlocks = 22;
  static std::atomic<int> n{0};
  const int start = (static_cast<int>(::getpid()) * 7 + n++) % kBlocks;
  for (int i = 0; i < kBlocks; ++i) {
    const int block = (start + i) % kBlocks;
    const std::string path = "/tmp/gpulab-test-ports-" + std::to_string(block) + ".lock";
    const int fd = ::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return 7000 + block * 1100;  // fd stays open
    ::close(fd);
  }
  return 7000 + start * 1100;  // every block taken: share one, as before
}

}  // namespace gpulab::testing
