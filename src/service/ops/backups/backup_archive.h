// The backup file: one tar holding "image.tar" (the engine's image archive, streamed in as it is
// saved) and "gpulab-backup.json" (the container's settings and the image archive's SHA-256).
// Written to a .partial file and renamed when complete; verified before anything is restored.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/result.h"
#include "service/domain/records.h"

namespace gpulab::service {

struct BackupManifest {
  int format = 1;
  std::string name;    // backup name
  std::string source;  // container it was made from
  std::string owner;
  std::string image;  // the image ref inside image.tar ("gpulab-backup:<name>")
  std::string created_at;
  std::string image_sha256;
  std::int64_t image_bytes = 0;
  ContainerSpec spec;
  Json to_json() const;
  static Result<BackupManifest> from_json(const Json& j);
};

inline constexpr const char* kImageMember = "image.tar";
inline constexpr const char* kManifestMember = "gpulab-backup.json";

class BackupWriter {
 public:
  // Opens `final_path` + ".partial" for writing.
  static Result<std::unique_ptr<BackupWriter>> create(const std::string& final_path);
  ~BackupWriter();
  Status write(const char* data, size_t n);  // image archive bytes, hashed as they pass
  std::int64_t bytes() const { return bytes_; }
  // What the archive is expected to take (the engine's image size), for a full disk's error.
  void expect_bytes(std::uint64_t n) { expected_bytes_ = n; }
  // Fills image_sha256/image_bytes, appends the manifest, fsyncs, renames to the final path.
  Status finish(BackupManifest& manifest);
  void abandon();  // removes the partial file

 private:
  BackupWriter() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::int64_t bytes_ = 0;
  std::uint64_t expected_bytes_ = 0;
  std::string final_path_, partial_path_;
};

// Reads the manifest; with verify, also recomputes the image archive's SHA-256. Any mismatch,
// truncation or foreign layout is kDataError naming what is wrong.
// `shown_as` names the backup in errors when `path` is a temporary file (an upload).
Result<BackupManifest> read_backup(const std::string& path, bool verify,
                                   const std::string& shown_as = {});

// Streams the image archive member to `sink` (for loading into an engine).
Status read_image_member(const std::string& path, const BackupManifest& manifest,
                         const std::function<Status(const char*, size_t)>& sink);

// Offset of the image archive inside the backup file (after its tar header).
inline constexpr std::int64_t kImageOffset = 512;

}  // namespace gpulab::service
