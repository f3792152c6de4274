// Docker Engine API client: negotiates the API version, then wraps the container, exec, image
// and event endpoints in typed calls that return Result<T> with gpulab error codes.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/names.h"
#include "core/result.h"
#include "docker/engine_error.h"
#include "docker/http_transport.h"
#include "docker/types.h"

namespace gpulab::docker {

// The newest API version this client speaks; the one used is min(this, the server's).
inline constexpr const char* kMaxApiVersion = "1.43";
// kStartEngineHint (http_transport.h) is the hint of kUnavailable errors.

// Error mapping (every call):
//   engine unreachable / connection broken -> kUnavailable, hint kStartEngineHint
//   400 -> kInvalidArgument      401/403 -> kPermissionDenied      404 -> kNotFound
//   409 "name ... already in use" -> kAlreadyExists, other 409 -> kConflict
//   500 "port is already allocated" / "address already in use" -> kConflict
//   500 "could not select device driver" (no NVIDIA toolkit) -> kUnavailable
//   other 5xx -> kInternal      request timeout -> kTimeout
// Error::message carries the engine's own message, prefixed with what was attempted:
//   "start container my-lab: driver failed programming external connectivity ..."
// 304 (start of a running / stop of a stopped container) counts as success.
//
// Thread safety: all methods are const and may be called from several threads at once.
class Client {
 public:
  // Uses `transport` with an explicit API version ("1.41"); no request is sent.
  Client(std::shared_ptr<HttpTransport> transport, std::string api_version);

  // Connects: GET /version (unversioned), picks min(server ApiVersion, kMaxApiVersion).
  static Result<Client> connect(const Endpoint& endpoint);
  static Result<Client> connect(std::shared_ptr<HttpTransport> transport);
  // connect(Endpoint::from_env()).
  static Result<Client> from_env();

  const std::string& api_version() const { return api_version_; }  // "1.41"
  std::string describe() const;  // "unix:///var/run/docker.sock (API 1.41)"
  HttpTransport& transport() const { return *transport_; }

  // ---- engine ----
  Status ping() const;  // GET /_ping
  Result<VersionInfo> version() const;
  Result<EngineInfo> info() const;

  // ---- containers ----
  // Returns the new container's id. Fails kNotFound when the image is absent (no pull is done).
  Result<std::string> create_container(const CreateSpec& spec) const;
  // Same, plus bind mounts / host network for trusted local callers only (see HostAccess).
  Result<std::string> create_container(const CreateSpec& spec, const HostAccess& host) const;
  Status start_container(const std::string& id_or_name) const;
  // Sends SIGTERM, then SIGKILL after timeout_s.
  Status stop_container(const std::string& id_or_name, int timeout_s = 10) const;
  Status restart_container(const std::string& id_or_name, int timeout_s = 10) const;
  Status kill_container(const std::string& id_or_name, const std::string& signal = "SIGKILL") const;
  // force: kill a running one first; volumes: remove its anonymous volumes.
  Status remove_container(const std::string& id_or_name, bool force = false,
                          bool volumes = true) const;
  Result<ContainerInfo> inspect_container(const std::string& id_or_name) const;
  Result<std::vector<ContainerSummary>> list_containers(const ListOptions& options = {}) const;
  Status update_container(const std::string& id_or_name, const ResourceUpdate& update) const;
  Status rename_container(const std::string& id_or_name, const std::string& new_name) const;
  // Blocks until the container stops ("not-running", "next-exit", "removed"); its exit code.
  Result<int> wait_container(const std::string& id_or_name,
                             const std::string& condition = "not-running") const;

  // Logs so far, stdout and stderr separated (demultiplexed unless the container has a TTY).
  Result<LogOutput> logs(const std::string& id_or_name, const LogOptions& options = {}) const;
  // Streams logs (options.follow keeps it open) until the container stops, `cancel` turns true,
  // or on_chunk returns false. is_stderr tells the stream of each chunk.
  Status logs_stream(const std::string& id_or_name, const LogOptions& options,
                     const std::function<bool(bool is_stderr, std::string_view chunk)>& on_chunk,
                     const std::atomic<bool>* cancel = nullptr) const;
  // One sample (stream=false; the engine waits ~1 s for the CPU delta). Container must run.
  Result<ContainerStats> stats(const std::string& id_or_name) const;

  // ---- exec ----
  Result<std::string> exec_create(const std::string& container, const ExecSpec& spec) const;
  // Runs the exec and collects its output until it ends (no time limit: as long as the command
  // runs; give long commands a `timeout` of their own inside).
  Result<LogOutput> exec_start(const std::string& exec_id, bool tty = false) const;
  Result<ExecInspect> exec_inspect(const std::string& exec_id) const;
  // create + start + inspect: runs cmd in a running container, returns output and exit code.
  Result<ExecResult> exec(const std::string& container, const std::vector<std::string>& cmd,
                          const std::vector<std::string>& env = {}) const;

  // ---- container filesystem ----
  // GET /containers/{id}/archive?path=... streamed into a tar file.
  Status copy_from_container(const std::string& id_or_name, const std::string& path,
                             const std::filesystem::path& dest_tar) const;
  // The same archive handed to `sink` piece by piece (false stops it: kDataError), the whole
  // request within `timeout` (0: no limit).
  Status copy_from_container_to(const std::string& id_or_name, const std::string& path,
                                const BodySink& sink, std::chrono::milliseconds timeout) const;
  // PUT /containers/{id}/archive: extracts a tar into directory `dest_dir` in the container.
  Status copy_to_container(const std::string& id_or_name, const std::string& dest_dir,
                           const std::filesystem::path& src_tar) const;
  // Puts one small file (a secret, say) at absolute `path` in a created or running container,
  // with `mode`; its folder is made (or set to) mode 0700. Nothing of it shows in inspect.
  Status put_file(const std::string& id_or_name, const std::string& path, std::string_view contents,
                  std::uint32_t mode = 0600) const;

  // ---- images ----
  // Snapshots a container's filesystem as an image; returns the new image id ("sha256:...").
  // The image keeps the container's config (Cmd, Env, ExposedPorts, and its labels, with
  // spec.labels added over them).
  Result<std::string> commit(const std::string& container, const CommitSpec& spec) const;
  Result<std::vector<ImageSummary>> list_images(const ImageListOptions& options = {}) const;
  Result<ImageInfo> inspect_image(const std::string& name_or_id) const;
  bool image_exists(const std::string& name_or_id) const;
  // force: also untag from other tags / remove while stopped containers use it.
  Status remove_image(const std::string& name_or_id, bool force = false,
                      bool prune_parents = true) const;
  Status tag_image(const std::string& name_or_id, const std::string& repo,
                   const std::string& tag = "latest") const;
  // GET /images/get streamed into `dest_tar` (docker save format: manifest.json, layers).
  // Written to dest_tar + ".partial" and renamed when complete.
  Status save_images(const std::vector<std::string>& names,
                     const std::filesystem::path& dest_tar) const;
  // POST /images/load from a docker-save tar; returns the loaded names ("repo:tag" or ids).
  Result<std::vector<std::string>> load_images(const std::filesystem::path& src_tar,
                                               const ProgressFn& progress = {}) const;
  // The same two streamed: save_images_to hands the archive to `sink` piece by piece (false
  // stops it: kCancelled); load_images_from uploads `size` bytes that `reader` gives.
  Status save_images_to(const std::vector<std::string>& names, const BodySink& sink) const;
  Result<std::vector<std::string>> load_images_from(long long size, const BodyReader& reader,
                                                    const ProgressFn& progress = {}) const;
  // POST /build with a tar context; returns the image id. A failed step -> kInvalidArgument
  // carrying the engine's errorDetail message (and the progress callback saw the output).
  Result<std::string> build_image(const BuildSpec& spec, const ProgressFn& progress = {}) const;
  // POST /images/create?fromSrc=- with a rootfs tar (docker import); returns the image id.
  Result<std::string> import_image(const ImportSpec& spec, const ProgressFn& progress = {}) const;

  // ---- events ----
  // Streams engine events matching `filter` to on_event until it returns false, `cancel` turns
  // true, or filter.until passes. A successful return means the stream ended in one of those ways.
  Status events(const EventFilter& filter, const std::function<bool(const Event&)>& on_event,
                const std::atomic<bool>* cancel = nullptr) const;

 private:
  std::string path(const std::string& p) const;  // "/v1.41" + p
  std::shared_ptr<HttpTransport> transport_;
  std::string api_version_;
};

// Container names follow gpulab's one rule for object names (core/names.h).
inline constexpr std::size_t kMaxContainerNameLength = kMaxObjectNameLength;
inline bool valid_container_name(std::string_view name) {
  return valid_object_name(name);
}

}  // namespace gpulab::docker
