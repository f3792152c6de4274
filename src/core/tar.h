// The one tar codec: a streaming writer (ustar, GNU long names, base-256 sizes) for build
// contexts, test root filesystems and backups, and a sequential reader (ustar, GNU long names,
// pax) over a file or any byte stream (a gzip stream for downloaded data sets).
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab {

enum class TarType : char {
  kFile = '0',
  kHardLink = '1',
  kSymlink = '2',
  kCharDevice = '3',
  kBlockDevice = '4',
  kDirectory = '5',
  kFifo = '6',
};

struct TarEntry {
  std::string name;  // relative path, "/" separated; directories without trailing "/"
  TarType type = TarType::kFile;
  std::uint32_t mode = 0644;
  std::uint32_t uid = 0, gid = 0;
  std::int64_t size = 0;    // files only
  std::int64_t mtime = 0;   // unix seconds
  std::string link_target;  // symlinks and hard links
  std::uint32_t dev_major = 0, dev_minor = 0;
};

// Writes a tar to a file, one entry after another; nothing is held in memory but one block.
class TarWriter {
 public:
  static Result<TarWriter> create(const std::filesystem::path& path);
  TarWriter(TarWriter&&) noexcept;
  TarWriter& operator=(TarWriter&&) noexcept;
  ~TarWriter();

  Status add_file(const std::string& name, std::string_view data, std::uint32_t mode = 0644);
  Status add_directory(const std::string& name, std::uint32_t mode = 0755);
  Status add_symlink(const std::string& name, const std::string& target);
  // Copies a host file (regular file, symlink or directory entry only) under `name`.
  Status add_path(const std::string& name, const std::filesystem::path& host_path);
  // Adds a host directory tree under `prefix` ("" = at the root), keeping modes and symlinks.
  Status add_tree(const std::filesystem::path& host_dir, const std::string& prefix = "");
  // Generic: header for `entry`, then entry.size bytes from `data`.
  Status add(const TarEntry& entry, std::string_view data = {});
  // Writes the two zero end blocks, flushes and closes. Must be called; the destructor only
  // closes (leaving an incomplete archive).
  Status finish();

 private:
  explicit TarWriter(std::FILE* f);
  Status write_header(const TarEntry& entry);
  Status write_raw(const void* data, std::size_t n);
  std::FILE* f_ = nullptr;
};

// The header block of one plain entry (name and link target up to 100 bytes; no long-name
// records), for writers that place entries themselves (the backup file patches its first header).
std::array<char, 512> tar_header_block(const TarEntry& entry);
// Parses one header block; kDataError for a bad checksum or an all-zero (end) block.
Result<TarEntry> parse_tar_header_block(const char* block);

// The parts of a member's name when it stays inside the folder it is unpacked into: relative,
// no ".."; "." and empty parts dropped. nullopt for an absolute name, a "..", or nothing left.
// Every unpacker of archives from elsewhere (data sets, GPU probe answers) goes through it.
std::optional<std::vector<std::string>> tar_member_parts(std::string_view name);

// A byte stream a tar is read from: `read` fills exactly n bytes (false at the end); `skip`
// passes n bytes (a seek, for files); `size` is the total when known, to name truncation early.
struct TarInput {
  std::function<bool(char* buf, std::size_t n)> read;
  std::function<bool(std::int64_t n)> skip;
  std::int64_t size = -1;
  std::string what;  // for messages: "tar <what> is damaged: ..."
};

// Reads a tar sequentially. for_each sees every entry; `read` (valid only during the callback,
// once per entry) returns that entry's contents up to max_bytes; `copy` streams all of them.
class TarReader {
 public:
  using ReadFn = std::function<Result<std::string>(std::int64_t max_bytes)>;
  using SinkFn = std::function<Status(const char* data, std::size_t n)>;
  struct EntryData {
    ReadFn read;
    std::function<Status(const SinkFn& sink)> copy;
  };
  // Callback returns false to stop early. A truncated or corrupt archive -> kDataError.
  static Status for_each(const std::filesystem::path& path,
                         const std::function<bool(const TarEntry&, const ReadFn& read)>& fn);
  static Status for_each(const TarInput& in,
                         const std::function<bool(const TarEntry&, const EntryData& data)>& fn);
  static Result<std::vector<TarEntry>> list(const std::filesystem::path& path);
  // Contents of one member (e.g. "manifest.json"); kNotFound if absent.
  static Result<std::string> read_member(const std::filesystem::path& path, const std::string& name,
                                         std::int64_t max_bytes = 64 << 20);
};

}  // namespace gpulab
