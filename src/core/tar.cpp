// ustar writer (GNU long-name records for names over 100 bytes, base-256 for huge sizes) and a
// sequential reader that understands ustar, GNU long names and pax headers (docker save uses pax).
#include "core/tar.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include "core/strings.h"

namespace gpulab {

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

// -1 for a base-256 number beyond 2^55 (no real archive has one; larger would overflow).
std::int64_t get_number(const char* field, std::size_t width) {
  auto u = reinterpret_cast<const unsigned char*>(field);
  if (u[0] & 0x80) {  // base-256
    std::int64_t v = u[0] & 0x7f;
    for (std::size_t i = 1; i < width; ++i) {
      if (v >= (std::int64_t{1} << 47)) return -1;
      v = (v << 8) | u[i];
    }
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

  const auto b = tar_header_block(e);
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

std::array<char, kBlock> tar_header_block(const TarEntry& e) {
  std::array<char, kBlock> b{};
  std::string name = e.name;
  if (e.type == TarType::kDirectory && !name.empty() && name.back() != '/') name += '/';
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
  return b;
}

std::optional<std::vector<std::string>> tar_member_parts(std::string_view name) {
  if (name.empty() || name.front() == '/') return std::nullopt;
  std::vector<std::string> parts;
  std::size_t at = 0;
  while (at <= name.size()) {
    const std::size_t end = std::min(name.find('/', at), name.size());
    const std::string_view p = name.substr(at, end - at);
    if (p == "..") return std::nullopt;
    if (!p.empty() && p != ".") parts.emplace_back(p);
    at = end + 1;
  }
  if (parts.empty()) return std::nullopt;
  return parts;
}

Result<TarEntry> parse_tar_header_block(const char* b) {
  if (std::all_of(b, b + kBlock, [](char c) { return c == 0; }))
    return Error(Code::kDataError, "unexpected end of archive");
  if (get_number(b + 148, 8) != checksum(b))
    return Error(Code::kDataError, "tar header checksum mismatch");
  TarEntry e;
  const char type = b[156] ? b[156] : '0';
  e.size = get_number(b + 124, 12);
  e.name = get_string(b, 100);
  const std::string prefix = get_string(b + 345, 155);
  if (!prefix.empty() && std::memcmp(b + 257, "ustar\0", 6) == 0) e.name = prefix + "/" + e.name;
  e.link_target = get_string(b + 157, 100);
  e.type = static_cast<TarType>(type == '7' ? '0' : type);
  e.mode = static_cast<std::uint32_t>(get_number(b + 100, 8));
  e.uid = static_cast<std::uint32_t>(get_number(b + 108, 8));
  e.gid = static_cast<std::uint32_t>(get_number(b + 116, 8));
  e.mtime = get_number(b + 136, 12);
  e.dev_major = static_cast<std::uint32_t>(get_number(b + 329, 8));
  e.dev_minor = static_cast<std::uint32_t>(get_number(b + 337, 8));
  return e;
}

namespace {

// "<len> key=value\n" records of a pax header.
void parse_pax(const std::string& payload, std::map<std::string, std::string>& pax) {
  std::size_t i = 0;
  while (i < payload.size()) {
    std::size_t sp = payload.find(' ', i);
    if (sp == std::string::npos) break;
    std::size_t len = std::strtoull(payload.c_str() + i, nullptr, 10);
    if (len == 0 || len > payload.size() - i || sp + 1 > i + len - 1) break;
    std::string rec = payload.substr(sp + 1, i + len - sp - 2);
    auto eq = rec.find('=');
    if (eq != std::string::npos) pax[rec.substr(0, eq)] = rec.substr(eq + 1);
    i += len;
  }
}

}  // namespace

namespace {

// One pass over a tar stream: each header (metadata records folded into the entry they
// describe), then that entry's data, read at most once, and the rest skipped.
class TarStream {
 public:
  explicit TarStream(const TarInput& in) : in_(in) {}

  // A member named in a message: its name may hold any byte, the message is one line.
  static std::string entry(const std::string& name) {
    return name.empty() ? "an entry without a name" : "entry " + printable(name);
  }

  Error corrupt(const std::string& why) const {
    return Error(Code::kDataError, "tar " + in_.what + " is damaged: " + why,
                 "the file is truncated or not a tar archive");
  }

  // The next real entry, or nullopt at the end-of-archive block.
  Result<std::optional<TarEntry>> next() {
    std::array<char, kBlock> b{};
    while (true) {
      if (!in_.read(b.data(), kBlock)) return corrupt("it ends without the end-of-archive blocks");
      pos_ += kBlock;
      if (std::all_of(b.begin(), b.end(), [](char c) { return c == 0; }))
        return std::optional<TarEntry>();
      auto parsed = parse_tar_header_block(b.data());
      if (!parsed)
        return corrupt(parsed.error().message + " at byte " + std::to_string(pos_ - kBlock));
      const char type = b[156] ? b[156] : '0';
      if (!sane(parsed->size))
        return corrupt(entry(parsed->name) + " declares a size of " + std::to_string(parsed->size) +
                       " bytes");
      if (!fits(parsed->size))
        return corrupt(entry(parsed->name) + " runs past the end of the file (it declares " +
                       std::to_string(parsed->size) + " bytes)");
      if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
        if (auto st = read_metadata(type, parsed->size); !st.ok()) return st.error();
        continue;
      }
      TarEntry e = std::move(*parsed);
      apply_metadata(e);
      if (!sane(e.size))
        return corrupt(entry(e.name) + " declares a size of " + std::to_string(e.size) + " bytes");
      if (!fits(e.size))
        return corrupt(entry(e.name) + " runs past the end of the file (it declares " +
                       std::to_string(e.size) + " bytes)");
      data_left_ = padded(e.size);
      content_left_ = e.size;
      return std::optional<TarEntry>(std::move(e));
    }
  }

  // The current entry's contents, for the callback: valid until skip_rest().
  TarReader::EntryData data_of(const TarEntry& e) {
    TarReader::EntryData data;
    data.read = [this, &e](std::int64_t max_bytes) -> Result<std::string> {
      std::string out(static_cast<std::size_t>(std::min(max_bytes, content_left_)), '\0');
      if (!take(out.data(), out.size())) return corrupt("short read in " + entry(e.name));
      return out;
    };
    data.copy = [this, &e](const TarReader::SinkFn& sink) -> Status {
      // Sized to the entry (up to 1 MiB): small entries do not pay for a large buffer.
      std::vector<char> buf(
          static_cast<std::size_t>(std::min<std::int64_t>(content_left_, 1 << 20)));
      while (content_left_ > 0) {
        const auto n = static_cast<std::size_t>(
            std::min<std::int64_t>(content_left_, static_cast<std::int64_t>(buf.size())));
        if (!take(buf.data(), n)) return corrupt("short read in " + entry(e.name));
        if (auto st = sink(buf.data(), n); !st.ok()) return st;
      }
      return ok_status();
    };
    return data;
  }

  // Passes what the callback did not read of the current entry (and its padding).
  bool skip_rest() {
    std::int64_t n = data_left_;
    pos_ += n;
    data_left_ = content_left_ = 0;
    if (n <= 0) return true;
    if (in_.skip) return in_.skip(n);
    std::array<char, 1 << 16> sink;  // NOLINT(cppcoreguidelines-pro-type-member-init): scratch
    while (n > 0) {
      const auto k = static_cast<std::size_t>(std::min<std::int64_t>(n, sink.size()));
      if (!in_.read(sink.data(), k)) return false;
      n -= static_cast<std::int64_t>(k);
    }
    return true;
  }

 private:
  // Sizes a header may declare: not negative, and small enough that offsets cannot overflow.
  static bool sane(std::int64_t size) { return size >= 0 && size <= (std::int64_t{1} << 55); }
  bool fits(std::int64_t size) const { return in_.size < 0 || pos_ + padded(size) <= in_.size; }

  bool take(char* buf, std::size_t n) {
    if (!in_.read(buf, n)) return false;
    data_left_ -= static_cast<std::int64_t>(n);
    content_left_ -= static_cast<std::int64_t>(n);
    return true;
  }

  // GNU long names ('L', 'K') and pax records ('x'; global 'g' ones are read and ignored).
  Status read_metadata(char type, std::int64_t size) {
    if (size > (16 << 20)) return corrupt("oversized metadata record");
    std::string payload(static_cast<std::size_t>(padded(size)), '\0');
    if (!in_.read(payload.data(), payload.size())) return corrupt("short read");
    pos_ += static_cast<std::int64_t>(payload.size());
    payload.resize(static_cast<std::size_t>(size));
    if (type == 'L') long_name_ = payload.c_str();
    if (type == 'K') long_link_ = payload.c_str();
    if (type == 'x') parse_pax(payload, pax_);
    return ok_status();
  }

  void apply_metadata(TarEntry& e) {
    if (!long_name_.empty()) e.name = long_name_;
    if (!long_link_.empty()) e.link_target = long_link_;
    if (pax_.count("path")) e.name = pax_["path"];
    if (pax_.count("linkpath")) e.link_target = pax_["linkpath"];
    if (pax_.count("size")) e.size = std::strtoll(pax_["size"].c_str(), nullptr, 10);
    long_name_.clear();
    long_link_.clear();
    pax_.clear();
    while (e.name.size() > 1 && e.name.back() == '/') e.name.pop_back();
    if (e.name.starts_with("./") && e.name.size() > 2) e.name.erase(0, 2);
    if (e.type != TarType::kFile) e.size = e.type == TarType::kHardLink ? 0 : e.size;
  }

  const TarInput& in_;
  std::int64_t pos_ = 0;           // bytes consumed from in_
  std::int64_t data_left_ = 0;     // of the current entry, padding included
  std::int64_t content_left_ = 0;  // of the current entry's contents
  std::string long_name_, long_link_;
  std::map<std::string, std::string> pax_;
};

}  // namespace

Status TarReader::for_each(const TarInput& in,
                           const std::function<bool(const TarEntry&, const EntryData&)>& fn) {
  TarStream stream(in);
  while (true) {
    auto next = stream.next();
    if (!next) return next.error();
    if (!*next) return ok_status();
    const TarEntry& e = **next;
    if (!fn(e, stream.data_of(e))) return ok_status();
    if (!stream.skip_rest()) return stream.corrupt("short read in " + TarStream::entry(e.name));
  }
}

Status TarReader::for_each(const fs::path& path,
                           const std::function<bool(const TarEntry&, const ReadFn& read)>& fn) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Error(Code::kNotFound, "cannot open tar " + path.string());
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> guard(f, std::fclose);
  std::error_code ec;
  TarInput in;
  in.what = path.string();
  in.size = static_cast<std::int64_t>(fs::file_size(path, ec));
  in.read = [f](char* buf, std::size_t n) { return std::fread(buf, 1, n, f) == n; };
  in.skip = [f](std::int64_t n) { return fseeko(f, n, SEEK_CUR) == 0; };
  return for_each(in, [&](const TarEntry& e, const EntryData& data) { return fn(e, data.read); });
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

}  // namespace gpulab
