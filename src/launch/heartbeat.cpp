// Heartbeat file: fixed-size records written in place, read back with their modification time.
// A record is "#<progress points> <slowest phase in ms> <what>"; the reader also takes plain
// text (no counters), which is what a shell script writing the file produces.
#include "launch/heartbeat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core/strings.h"

namespace gpulab::launch {

namespace {

constexpr size_t kRecord = 192;  // longer texts are cut; the reader trims the padding

struct Channel {
  std::mutex mu;
  int fd = -1;
  bool opened = false;
  bool armed = false;
  int64_t progress = 0;
  std::chrono::steady_clock::time_point last_point;
  int64_t slowest_ms = 0;
};

Channel& channel() {
  static Channel c;
  return c;
}

void write_locked(Channel& c, std::string_view what) {
  if (!c.opened) {
    c.opened = true;
    const char* path = std::getenv(kEnvHeartbeatFile);
    if (path && *path) c.fd = ::open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  }
  if (c.fd < 0) return;
  char buf[kRecord];
  std::memset(buf, ' ', sizeof buf);
  int head = std::snprintf(buf, sizeof buf, "#%" PRId64 " %" PRId64 " ", c.progress, c.slowest_ms);
  const size_t at = std::min(head > 0 ? static_cast<size_t>(head) : 0, sizeof buf - 1);
  std::memcpy(buf + at, what.data(), std::min(what.size(), sizeof buf - 1 - at));
  for (char& ch : buf)
    if (ch == '\0') ch = ' ';  // snprintf's terminator
  buf[sizeof buf - 1] = '\n';
  // Same size every time, so the record is replaced whole and the file never grows.
  (void)!::pwrite(c.fd, buf, sizeof buf, 0);
}

}  // namespace

void heartbeat(std::string_view what) {
  Channel& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  const auto now = std::chrono::steady_clock::now();
  if (c.progress > 0) {
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - c.last_point).count();
    c.slowest_ms = std::max<int64_t>(c.slowest_ms, ms);
  }
  c.last_point = now;
  ++c.progress;
  c.armed = true;
  write_locked(c, what);
}

void heartbeat_if_armed(std::string_view what) {
  Channel& c = channel();
  std::lock_guard<std::mutex> lock(c.mu);
  if (c.armed) write_locked(c, what);
}

std::optional<Beat> read_heartbeat(const std::string& file, const std::optional<Beat>& previous) {
  struct stat st {};
  if (file.empty() || ::stat(file.c_str(), &st) != 0) return std::nullopt;
  const auto when = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(st.st_mtim.tv_sec) + std::chrono::nanoseconds(st.st_mtim.tv_nsec)));
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  if (st.st_size == 0 || trim(line).empty()) {
    // Between a writer's truncate and its write: the text is the one it replaces.
    if (!previous) return std::nullopt;
    Beat b = *previous;
    b.when = std::max(b.when, when);
    return b;
  }
  Beat b;
  b.when = when;
  int64_t progress = 0, slowest_ms = 0;
  int used = 0;
  if (!line.empty() && line[0] == '#' &&
      std::sscanf(line.c_str(), "#%" SCNd64 " %" SCNd64 " %n", &progress, &slowest_ms, &used) >=
          2 &&
      used > 0) {
    b.progress = progress;
    b.slowest_phase_s = static_cast<double>(slowest_ms) / 1000.0;
    line.erase(0, static_cast<size_t>(used));
  }
  b.what = trim(line);
  return b;
}

}  // namespace gpulab::launch
