// Heartbeat file: fixed-size records written in place, read back with their modification time.
#include "launch/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core/strings.h"

namespace gpulab::launch {

namespace {

constexpr size_t kRecord = 160;  // longer texts are cut; the reader trims the padding

struct Channel {
  std::mutex mu;
  int fd = -1;
  bool opened = false;
  bool armed = false;
};

Channel& channel() {
  static Channel c;
  return c;
}

}  // namespace

namespace {

void write_locked(Channel& c, std::string_view what) {
  if (!c.opened) {
    c.opened = true;
    const char* path = std::getenv(kEnvHeartbeatFile);
    if (path && *path) c.fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  }
  if (c.fd < 0) return;
  char buf[kRecord];
  std::memset(buf, ' ', sizeof buf);
  std::memcpy(buf, what.data(), std::min(what.size(), sizeof buf - 1));
  buf[sizeof buf - 1] = '\n';
  // Same size every time, so the record is replaced whole and the file never grows.
  (void)!::pwrite(c.fd, buf, sizeof buf, 0);
}

}  // namespace

void heartbeat(std::string_view what) {
  Channel& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  c.armed = true;
  write_locked(c, what);
}

void heartbeat_if_armed(std::string_view what) {
  Channel& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.armed) write_locked(c, what);
}

std::optional<Beat> read_heartbeat(const std::string& file) {
  struct stat st {};
  if (file.empty() || ::stat(file.c_str(), &st) != 0 || st.st_size == 0) return std::nullopt;
  Beat b;
  b.when = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  std::ifstream in(file);
  std::getline(in, b.what);
  b.what = trim(b.what);
  return b;
}

}  // namespace gpulab::launch
