// A small tar reader on zlib's gz stream (see tar.h).
#include "train/data/fetch/tar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#if GPULAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace gpulab::train {

namespace fs = std::filesystem;

#if !GPULAB_HAVE_ZLIB

bool tar_gz_supported() {
  return false;
}
Result<std::vector<std::string>> extract_tar_gz(const fs::path&, const fs::path&) {
  return Result<std::vector<std::string>>(Code::kUnsupported,
                                          "gpulab was built without zlib; unpack with tar -xzf");
}

#else

namespace {

using Strings = std::vector<std::string>;

Result<Strings> bad(const std::string& msg) {
  return Result<Strings>(Code::kDataError, "bad archive: " + msg);
}

// Octal (NUL/space padded) or GNU base-256 numbers.
bool parse_number(const char* p, size_t n, uint64_t& out) {
  out = 0;
  if (static_cast<unsigned char>(p[0]) & 0x80) {
    for (size_t i = 1; i < n; ++i) out = (out << 8) | static_cast<unsigned char>(p[i]);
    return true;
  }
  size_t i = 0;
  while (i < n && p[i] == ' ') ++i;
  for (; i < n && p[i] >= '0' && p[i] <= '7'; ++i)
    out = out * 8 + static_cast<uint64_t>(p[i] - '0');
  return i == n || p[i] == '\0' || p[i] == ' ';
}

std::string field(const char* p, size_t n) {
  return std::string(p, strnlen(p, n));
}

bool checksum_ok(const unsigned char* h) {
  uint64_t stored = 0;
  if (!parse_number(reinterpret_cast<const char*>(h) + 148, 8, stored)) return false;
  uint64_t sum = 0;
  for (int i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : h[i];
  return sum == stored;
}

// A relative path with no "..", "." or empty parts; returns false for anything else.
bool safe_path(const std::string& name, fs::path& out) {
  if (name.empty() || name[0] == '/') return false;
  out.clear();
  for (const auto& part : fs::path(name)) {
    const std::string s = part.string();
    if (s == "..") return false;
    if (s.empty() || s == ".") continue;
    out /= part;
  }
  return !out.empty();
}

class GzReader {
 public:
  explicit GzReader(const fs::path& p) : gz_(gzopen(p.c_str(), "rb")) {}
  ~GzReader() {
    if (gz_) gzclose(gz_);
  }
  bool ok() const { return gz_ != nullptr; }
  // Reads exactly n bytes; false at a clean or unclean end.
  bool read(void* buf, size_t n) {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      const int got = gzread(gz_, p, static_cast<unsigned>(std::min<size_t>(n, 1 << 20)));
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  std::string error() {
    int err = 0;
    const char* msg = gzerror(gz_, &err);
    return err == Z_OK ? "the archive ends early (truncated download?)" : msg;
  }

 private:
  gzFile gz_;
};

}  // namespace

bool tar_gz_supported() {
  return true;
}

Result<Strings> extract_tar_gz(const fs::path& archive, const fs::path& dest) {
  GzReader in(archive);
  if (!in.ok()) return Result<Strings>(Code::kNotFound, "cannot open " + archive.string());
  std::error_code ec;
  fs::create_directories(dest, ec);
  const fs::path stage = dest / fmt::format(".gpulab-unpack-{}", ::getpid());
  fs::remove_all(stage, ec);
  fs::create_directories(stage, ec);
  if (ec) return Result<Strings>(Code::kInternal, "cannot create " + stage.string());
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{stage};

  std::set<std::string> tops;
  std::string long_name;  // from a GNU 'L' entry or a pax 'path' record, for the next entry
  unsigned char h[512];
  std::vector<char> buf(1 << 20);
  int entries = 0;
  while (true) {
    if (!in.read(h, 512)) return bad(in.error());
    if (std::all_of(h, h + 512, [](unsigned char c) { return c == 0; })) break;  // end marker
    if (!checksum_ok(h)) return bad(fmt::format("header checksum mismatch at entry {}", entries));
    ++entries;
    const char* hc = reinterpret_cast<const char*>(h);
    uint64_t size = 0;
    if (!parse_number(hc + 124, 12, size)) return bad("unreadable entry size");
    const char type = hc[156];
    std::string name = field(hc, 100);
    if (std::memcmp(hc + 257, "ustar", 5) == 0 && hc[345] != '\0')
      name = field(hc + 345, 155) + "/" + name;
    if (!long_name.empty()) name = std::move(long_name), long_name.clear();
    const uint64_t padded = (size + 511) / 512 * 512;

    if (type == 'L' || type == 'x' || type == 'g') {
      std::string data(padded, '\0');
      if (!in.read(data.data(), padded)) return bad(in.error());
      data.resize(size);
      if (type == 'L') long_name = field(data.data(), data.size());
      if (type == 'x') {
        // Records: "<len> key=value\n".
        size_t pos = 0;
        while (pos < data.size()) {
          const size_t sp = data.find(' ', pos);
          if (sp == std::string::npos) break;
          const size_t len = std::strtoul(data.c_str() + pos, nullptr, 10);
          if (len == 0 || pos + len > data.size()) break;
          const std::string rec = data.substr(sp + 1, pos + len - sp - 2);
          if (rec.rfind("path=", 0) == 0) long_name = rec.substr(5);
          pos += len;
        }
      }
      continue;
    }
    fs::path rel;
    const bool is_file = type == '0' || type == '\0' || type == '7';
    const bool is_dir = type == '5';
    if ((is_file || is_dir) && !safe_path(name, rel))
      return bad("unsafe path '" + name + "' (absolute or with ..)");
    if (is_dir) {
      fs::create_directories(stage / rel, ec);
      tops.insert(rel.begin()->string());
    }
    std::ofstream out;
    if (is_file) {
      fs::create_directories((stage / rel).parent_path(), ec);
      out.open(stage / rel, std::ios::binary | std::ios::trunc);
      if (!out) return Result<Strings>(Code::kInternal, "cannot write " + (stage / rel).string());
      tops.insert(rel.begin()->string());
    }
    // Links and special files are skipped: data sets do not need them.
    for (uint64_t left = padded; left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      if (!in.read(buf.data(), n)) return bad(in.error());
      const uint64_t used = padded - left;
      if (out.is_open() && used < size)
        out.write(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(n, size - used)));
      left -= n;
    }
    if (out.is_open()) {
      out.close();
      if (!out) return Result<Strings>(Code::kInternal, "cannot write " + (stage / rel).string());
    }
  }
  if (entries == 0) return bad("no entries");
  // Everything read cleanly: move the top-level entries into place.
  Strings placed;
  for (const auto& t : tops) {
    fs::remove_all(dest / t, ec);
    fs::rename(stage / t, dest / t, ec);
    if (ec) return Result<Strings>(Code::kInternal, "cannot move " + t + " into " + dest.string());
    placed.push_back(t);
  }
  return placed;
}

#endif

}  // namespace gpulab::train
