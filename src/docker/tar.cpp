// ustar writer (GNU long-name records for names over 100 bytes, base-256 for huge sizes) and a
// sequential reader that understands ustar, GNU long names and pax headers (docker save uses pax).
#include "docker/tar.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

namespace gpulab::docker {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kBlock = 512;

// Writes `value` as a NUL-terminated octal field of `width` bytes, or base-256 when too big.
void put_number(char* field, std::size_t width, std::int64_t value) {
  std::int64_t max_octal = (std::int64_t{1} << (3 * (width - 1))) - 1;
  if (value >= 0 && value <= max_octal) {
    std::snprintf(field, width, "%0*llo", static_cast<int>(width - 1),
                  static_cast<long long>(value));
    return;
  }
  std::memset(field, 0, width);
  for (std::size_t i = width - 1; i > 0; --i, value >>= 8)
    field[i] = static_cast<char>(value & 0xff);
  field[0] = static_cast<char>(0x80);
}

std::int64_t get_number(const char* field, std::size_t width) {
  auto u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {  // base-256
    std::int64_t v = u[0] & 0x7f;
    for (std::size_t i = 1; i < width; ++i) v = (v << 8) | u[i];
    return v;
  }
  std::int64_t v = 0;
  for (std::size_t i = 0; i < width && field[i]; ++i) {
    if (field[i] == ' ') continue;
    if (field[i] < '0' || field[i] > '7') break;
    v = v * 8 + (field[i] - '0');
  }
  return v;
}

std::string get_string(const char* field, std::size_t width) {
  return std::string(field, strnlen(field, width));
}

std::uint32_t checksum(const char* block) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < kBlock; ++i)
    sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(block[i]);
  return sum;
}

std::int64_t padded(std::int64_t n) {
  return (n + kBlock - 1) / kBlock * kBlock;
}

}  // namespace

// ---------------------------------------------------------------- writer

TarWriter::TarWriter(std::FILE* f) : f_(f) {}
TarWriter::TarWriter(TarWriter&& o) noexcept : f_(std::exchange(o.f_, nullptr)) {}
TarWriter& TarWriter::operator=(TarWriter&& o) noexcept {
  if (this != &o) {
    if (f_) std::fclose(f_);
    f_ = std::exchange(o.f_, nullptr);
  }
  return *this;
}
TarWriter::~TarWriter() {
  if (f_) std::fclose(f_);
}

Result<TarWriter> TarWriter::create(const fs::path& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f)
    return Error(Code::kInternal,
                 "cannot create tar " + path.string() + ": " + std::strerror(errno));
  return TarWriter(f);
}

Status TarWriter::write_raw(const void* data, std::size_t n) {
  if (!f_) return Error(Code::kInternal, "tar writer is closed");
  if (std::fwrite(data, 1, n, f_) != n)
    return Error(Code::kInternal, "cannot write tar (disk full?)");
  return ok_status();
}

Status TarWriter::write_header(const TarEntry& e) {
  std::string name = e.name;
  if (e.type == TarType::kDirectory && !name.empty() && name.back() != '/') name += '/';
  // GNU long-name records carry what does not fit the 100-byte fields.
  auto long_record = [&](char type, const std::string& value) -> Status {
    TarEntry l;
    l.name = "././@LongLink";
    l.size = static_cast<std::int64_t>(value.size() + 1);
    std::array<char, kBlock> b{};
    std::memcpy(b.data(), l.name.data(), l.name.size());
    put_number(b.data() + 100, 8, 0644);
    put_number(b.data() + 108, 8, 0);
    put_number(b.data() + 116, 8, 0);
    put_number(b.data() + 124, 12, l.size);
    put_number(b.data() + 136, 12, 0);
    b[156] = type;
    std::memcpy(b.data() + 257, "ustar  ", 8);  // GNU magic
    std::snprintf(b.data() + 148, 8, "%06o", checksum(b.data()));
    b[155] = ' ';
    if (auto s = write_raw(b.data(), kBlock); !s.ok()) return s;
    std::string data = value + '\0';
    data.resize(static_cast<std::size_t>(padded(l.size)), '\0');
    return write_raw(data.data(), data.size());
  };
  if (name.size() > 100)
    if (auto s = long_record('L', name); !s.ok()) return s;
  if (e.link_target.size() > 100)
    if (auto s = long_record('K', e.link_target); !s.ok()) return s;

  std::array<char, kBlock> b{};
  std::memcpy(b.data(), name.data(), std::min<std::size_t>(name.size(), 100));
  put_number(b.data() + 100, 8, e.mode & 07777);
  put_number(b.data() + 108, 8, e.uid);
  put_number(b.data() + 116, 8, e.gid);
  put_number(b.data() + 124, 12, e.type == TarType::kFile ? e.size : 0);
  put_number(b.data() + 136, 12, e.mtime);
  b[156] = static_cast<char>(e.type);
  std::memcpy(b.data() + 157, e.link_target.data(),
              std::min<std::size_t>(e.link_target.size(), 100));
  std::memcpy(b.data() + 257, "ustar", 6);
  std::memcpy(b.data() + 263, "00", 2);
  std::memcpy(b.data() + 265, "root", 4);
  std::memcpy(b.data() + 297, "root", 4);
  put_number(b.data() + 329, 8, e.dev_major);
  put_number(b.data() + 337, 8, e.dev_minor);
  std::snprintf(b.data() + 148, 8, "%06o", checksum(b.data()));
  b[155] = ' ';
  return write_raw(b.data(), kBlock);
}

Status TarWriter::add(const TarEntry& entry, std::string_view data) {
  if (entry.name.empty()) return Error(Code::kInvalidArgument, "tar entry without a name");
  if (entry.type == TarType::kFile && static_cast<std::int64_t>(data.size()) != entry.size)
    return Error(Code::kInvalidArgument, "tar entry " + entry.name + ": size does not match data");
  if (auto s = write_header(entry); !s.ok()) return s;
  if (entry.type != TarType::kFile || data.empty()) return ok_status();
  if (auto s = write_raw(data.data(), data.size()); !s.ok()) return s;
  static const std::array<char, kBlock> zeros{};
  return write_raw(zeros.data(), static_cast<std::size_t>(padded(entry.size) - entry.size));
}

Status TarWriter::add_file(const std::string& name, std::string_view data, std::uint32_t mode) {
  TarEntry e;
  e.name = name;
  e.mode = mode;
  e.size = static_cast<std::int64_t>(data.size());
  e.mtime = ::time(nullptr);
  return add(e, data);
}

Status TarWriter::add_directory(const std::string& name, std::uint32_t mode) {
  TarEntry e;
  e.name = name;
  e.type = TarType::kDirectory;
  e.mode = mode;
  e.mtime = ::time(nullptr);
  return add(e);
}

Status TarWriter::add_symlink(const std::string& name, const std::string& target) {
  TarEntry e;
  e.name = name;
  e.type = TarType::kSymlink;
  e.mode = 0777;
  e.link_target = target;
  e.mtime = ::time(nullptr);
  return add(e);
}

Status TarWriter::add_path(const std::string& name, const fs::path& host_path) {
  struct stat st {};
  if (::lstat(host_path.c_str(), &st) != 0)
    return Error(Code::kNotFound,
                 "cannot add " + host_path.string() + " to tar: " + std::strerror(errno));
  TarEntry e;
  e.name = name;
  e.mode = st.st_mode & 07777;
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.mtime = st.st_mtime;
  if (S_ISDIR(st.st_mode)) {
    e.type = TarType::kDirectory;
    return add(e);
  }
  if (S_ISLNK(st.st_mode)) {
    e.type = TarType::kSymlink;
    std::error_code ec;
    e.link_target = fs::read_symlink(host_path, ec).string();
    if (ec) return Error(Code::kInternal, "cannot read link " + host_path.string());
    return add(e);
  }
  if (!S_ISREG(st.st_mode))
    return Error(Code::kUnsupported,
                 "cannot add " + host_path.string() + " to tar: not a regular file");
  // Stream the file through in blocks rather than holding it in memory.
  std::FILE* in = std::fopen(host_path.c_str(), "rb");
  if (!in) return Error(Code::kNotFound, "cannot read " + host_path.string());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(in, std::fclose);
  e.size = st.st_size;
  if (auto s = write_header(e); !s.ok()) return s;
  std::vector<char> buf(1 << 16);
  std::int64_t left = e.size;
  while (left > 0) {
    std::size_t want = static_cast<std::size_t>(
        std::min<std::int64_t>(left, static_cast<std::int64_t>(buf.size())));
    std::size_t got = std::fread(buf.data(), 1, want, in);
    if (got != want)
      return Error(Code::kDataError, host_path.string() + " changed while being added to tar");
    if (auto s = write_raw(buf.data(), got); !s.ok()) return s;
    left -= static_cast<std::int64_t>(got);
  }
  static const std::array<char, kBlock> zeros{};
  return write_raw(zeros.data(), static_cast<std::size_t>(padded(e.size) - e.size));
}

Status TarWriter::add_tree(const fs::path& host_dir, const std::string& prefix) {
  std::error_code ec;
  std::vector<fs::path> paths;
  for (auto it = fs::recursive_directory_iterator(host_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    paths.push_back(it->path());
  if (ec) return Error(Code::kNotFound, "cannot walk " + host_dir.string() + ": " + ec.message());
  std::sort(paths.begin(), paths.end());  // parents before children, stable archives
  for (const auto& p : paths) {
    std::string rel = fs::relative(p, host_dir, ec).generic_string();
    if (auto s = add_path(prefix.empty() ? rel : prefix + "/" + rel, p); !s.ok()) return s;
  }
  return ok_status();
}

Status TarWriter::finish() {
  static const std::array<char, 2 * kBlock> zeros{};
  if (auto s = write_raw(zeros.data(), zeros.size()); !s.ok()) return s;
  bool ok = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
  if (!ok) return Error(Code::kInternal, "cannot finish tar (disk full?)");
  return ok_status();
}

// ---------------------------------------------------------------- reader

Status TarReader::for_each(const fs::path& path,
                           const std::function<bool(const TarEntry&, const ReadFn& read)>& fn) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Error(Code::kNotFound, "cannot open tar " + path.string());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, std::fclose);
  std::error_code ec;
  auto file_size = static_cast<std::int64_t>(fs::file_size(path, ec));
  auto corrupt = [&](const std::string& why) {
    return Error(Code::kDataError, "tar " + path.string() + " is damaged: " + why,
                 "the file is truncated or not a tar archive");
  };

  std::int64_t pos = 0;
  std::string long_name, long_link;
  std::map<std::string, std::string> pax;
  std::array<char, kBlock> b{};
  while (true) {
    if (std::fread(b.data(), 1, kBlock, f) != kBlock)
      return corrupt("it ends without the end-of-archive blocks");
    pos += kBlock;
    if (std::all_of(b.begin(), b.end(), [](char c) { return c == 0; })) return ok_status();
    if (get_number(b.data() + 148, 8) != checksum(b.data()))
      return corrupt("bad header checksum at byte " + std::to_string(pos - kBlock));
    TarEntry e;
    char type = b[156] ? b[156] : '0';
    e.size = get_number(b.data() + 124, 12);
    std::int64_t data_end = pos + padded(e.size);
    if (data_end > file_size) return corrupt("an entry runs past the end of the file");

    // Metadata records: read their payload and apply it to the next real entry.
    if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
      if (e.size > (16 << 20)) return corrupt("oversized metadata record");
      std::string payload(static_cast<std::size_t>(e.size), '\0');
      if (std::fread(payload.data(), 1, payload.size(), f) != payload.size())
        return corrupt("short read");
      if (type == 'L') long_name = payload.c_str();
      if (type == 'K') long_link = payload.c_str();
      if (type == 'x') {  // "<len> key=value\n" records
        std::size_t i = 0;
        while (i < payload.size()) {
          std::size_t sp = payload.find(' ', i);
          if (sp == std::string::npos) break;
          std::size_t len = std::strtoull(payload.c_str() + i, nullptr, 10);
          if (len == 0 || i + len > payload.size()) break;
          std::string rec = payload.substr(sp + 1, i + len - sp - 2);
          auto eq = rec.find('=');
          if (eq != std::string::npos) pax[rec.substr(0, eq)] = rec.substr(eq + 1);
          i += len;
        }
      }
      pos = data_end;
      if (fseeko(f, pos, SEEK_SET) != 0) return corrupt("seek failed");
      continue;
    }

    std::string prefix = get_string(b.data() + 345, 155);
    e.name = get_string(b.data(), 100);
    if (!prefix.empty() && std::memcmp(b.data() + 257, "ustar\0", 6) == 0)
      e.name = prefix + "/" + e.name;
    e.link_target = get_string(b.data() + 157, 100);
    if (!long_name.empty()) e.name = long_name;
    if (!long_link.empty()) e.link_target = long_link;
    if (pax.count("path")) e.name = pax["path"];
    if (pax.count("linkpath")) e.link_target = pax["linkpath"];
    if (pax.count("size")) {
      e.size = std::strtoll(pax["size"].c_str(), nullptr, 10);
      data_end = pos + padded(e.size);
      if (data_end > file_size) return corrupt("an entry runs past the end of the file");
    }
    long_name.clear();
    long_link.clear();
    pax.clear();
    while (e.name.size() > 1 && e.name.back() == '/') e.name.pop_back();
    if (e.name.starts_with("./") && e.name.size() > 2) e.name.erase(0, 2);
    e.type = static_cast<TarType>(type == '7' ? '0' : type);
    e.mode = static_cast<std::uint32_t>(get_number(b.data() + 100, 8));
    e.uid = static_cast<std::uint32_t>(get_number(b.data() + 108, 8));
    e.gid = static_cast<std::uint32_t>(get_number(b.data() + 116, 8));
    e.mtime = get_number(b.data() + 136, 12);
    e.dev_major = static_cast<std::uint32_t>(get_number(b.data() + 329, 8));
    e.dev_minor = static_cast<std::uint32_t>(get_number(b.data() + 337, 8));
    if (e.type != TarType::kFile) e.size = e.type == TarType::kHardLink ? 0 : e.size;

    std::int64_t data_start = pos;
    ReadFn read = [&](std::int64_t max_bytes) -> Result<std::string> {
      std::int64_t n = std::min(max_bytes, e.size);
      std::string out(static_cast<std::size_t>(n), '\0');
      if (fseeko(f, data_start, SEEK_SET) != 0 ||
          std::fread(out.data(), 1, out.size(), f) != out.size())
        return corrupt("short read in " + e.name);
      return out;
    };
    if (!fn(e, read)) return ok_status();
    pos = data_end;
    if (fseeko(f, pos, SEEK_SET) != 0) return corrupt("seek failed");
  }
}

Result<std::vector<TarEntry>> TarReader::list(const fs::path& path) {
  std::vector<TarEntry> out;
  auto st = for_each(path, [&](const TarEntry& e, const ReadFn&) {
    out.push_back(e);
    return true;
  });
  if (!st.ok()) return st.error();
  return out;
}

Result<std::string> TarReader::read_member(const fs::path& path, const std::string& name,
                                           std::int64_t max_bytes) {
  std::optional<Result<std::string>> found;
  auto st = for_each(path, [&](const TarEntry& e, const ReadFn& read) {
    if (e.name != name) return true;
    if (e.size > max_bytes) {
      found = Error(Code::kDataError, name + " in " + path.string() + " is larger than expected");
      return false;
    }
    found = read(max_bytes);
    return false;
  });
  if (!st.ok()) return st.error();
  if (!found) return Error(Code::kNotFound, "no " + name + " in " + path.string());
  return std::move(*found);
}

}  // namespace gpulab::docker
