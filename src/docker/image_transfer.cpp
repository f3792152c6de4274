// Image calls that move large bodies, streamed to or from files: save (docker save), load,
// build (tar context), import (rootfs tar), and the container filesystem archive.
#include <filesystem>
#include <regex>

#include "core/strings.h"
#include "docker/client.h"
#include "docker/client_internal.h"

namespace gpulab::docker {

using detail::call;
using detail::Query;

namespace {

// Sends a tar upload whose answer is a stream of JSON progress lines; returns the progress
// messages seen, or the first error the stream reported (mapped to `stream_error_code`).
Result<std::vector<Progress>> upload_with_progress(HttpTransport& transport, HttpRequest r,
                                                   const ProgressFn& progress,
                                                   const std::string& what,
                                                   Code stream_error_code) {
  std::vector<Progress> seen;
  std::string first_error;
  detail::JsonLines lines([&](const Json& j) {
    Progress p = detail::to_progress(j);
    if (!p.error.empty() && first_error.empty()) first_error = p.error;
    if (progress) progress(p);
    seen.push_back(std::move(p));
  });
  r.on_data = [&](std::string_view chunk) {
    lines.feed(chunk);
    return true;
  };
  auto resp = call(transport, r, what);
  if (!resp.ok()) return resp.error();
  lines.finish();
  if (!first_error.empty()) return Error(stream_error_code, what + ": " + trim(first_error));
  return seen;
}

HttpRequest tar_post(std::string target, const std::filesystem::path& tar) {
  HttpRequest r;
  r.method = "POST";
  r.target = std::move(target);
  r.headers.emplace_back("Content-Type", "application/x-tar");
  r.body_file = tar;
  return r;
}

Status need_file(const std::filesystem::path& p, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    return Error(Code::kNotFound, what + ": no such file " + p.string());
  return ok_status();
}

}  // namespace

Status Client::save_images(const std::vector<std::string>& names,
                           const std::filesystem::path& dest) const {
  if (names.empty()) return Error(Code::kInvalidArgument, "save images: no image named");
  Query q;
  for (const auto& n : names) q.add("names", n);
  HttpRequest r;
  r.target = path("/images/get" + q.str());
  std::filesystem::path partial = dest;
  partial += ".partial";
  r.response_file = partial;
  std::string what = "save image " + join(names, ", ") + " to " + dest.string();
  auto resp = call(*transport_, r, what);
  std::error_code ec;
  if (!resp.ok()) {
    std::filesystem::remove(partial, ec);
    return resp.error();
  }
  std::filesystem::rename(partial, dest, ec);
  if (ec) return Error(Code::kInternal, what + ": " + ec.message());
  return ok_status();
}

namespace {

// POST /images/load of an archive `r` carries; the names the engine reports loaded.
Result<std::vector<std::string>> load_archive(HttpTransport& transport, const HttpRequest& r,
                                              const ProgressFn& progress, const std::string& what) {
  auto seen = upload_with_progress(transport, r, progress, what, Code::kDataError);
  if (!seen.ok()) {
    Error e = seen.error();
    // A tar that is not an image archive is answered with a 500: it is the file's fault.
    if (e.code == Code::kInternal) e.code = Code::kDataError;
    if (e.hint.empty()) e.hint = "the file is not a complete image archive (docker save format)";
    return e;
  }
  std::vector<std::string> loaded;
  static const std::regex loaded_re(R"(Loaded image(?: ID)?: (\S+))");
  for (const auto& p : *seen) {
    std::smatch m;
    if (std::regex_search(p.stream, m, loaded_re)) loaded.push_back(m[1]);
  }
  return loaded;
}

}  // namespace

Result<std::vector<std::string>> Client::load_images(const std::filesystem::path& src,
                                                     const ProgressFn& progress) const {
  std::string what = "load images from " + src.string();
  if (auto st = need_file(src, what); !st.ok()) return st.error();
  return load_archive(*transport_, tar_post(path("/images/load?quiet=0"), src), progress, what);
}

Result<std::vector<std::string>> Client::load_images_from(long long size, const BodyReader& reader,
                                                          const ProgressFn& progress) const {
  HttpRequest r = tar_post(path("/images/load?quiet=0"), {});
  r.body_reader = reader;
  r.body_size = size;
  return load_archive(*transport_, r, progress, "load images");
}

Status Client::save_images_to(const std::vector<std::string>& names, const BodySink& sink) const {
  if (names.empty()) return Error(Code::kInvalidArgument, "save images: no image named");
  Query q;
  for (const auto& n : names) q.add("names", n);
  HttpRequest r;
  r.target = path("/images/get" + q.str());
  r.on_data = sink;
  std::string what = "save image " + join(names, ", ");
  auto resp = call(*transport_, r, what);
  if (!resp.ok()) return resp.error();
  // The sink stopped the stream: the archive is incomplete.
  if (resp->cancelled) return Error(Code::kInternal, what + ": stopped before the end");
  return ok_status();
}

Result<std::string> Client::build_image(const BuildSpec& spec, const ProgressFn& progress) const {
  std::string what =
      "build image " + (spec.tags.empty() ? std::string("(untagged)") : spec.tags[0]);
  if (auto st = need_file(spec.context_tar, what); !st.ok()) return st.error();
  Query q;
  for (const auto& t : spec.tags) q.add("t", t);
  q.add("dockerfile", spec.dockerfile).add("nocache", spec.no_cache).add("pull", spec.pull);
  q.add("rm", spec.remove_intermediate).add("forcerm", spec.remove_intermediate);
  if (!spec.build_args.empty()) q.add("buildargs", Json(spec.build_args).dump());
  if (!spec.labels.empty()) q.add("labels", Json(spec.labels).dump());
  q.add("networkmode", spec.network_mode).add("target", spec.target);
  if (spec.memory_bytes > 0) q.add("memory", static_cast<long long>(spec.memory_bytes));
  if (spec.shm_size_bytes > 0) q.add("shmsize", static_cast<long long>(spec.shm_size_bytes));
  HttpRequest r = tar_post(path("/build" + q.str()), spec.context_tar);
  auto seen = upload_with_progress(*transport_, r, progress, what, Code::kInvalidArgument);
  if (!seen.ok()) return seen.error();
  // The id comes as {"aux":{"ID":"sha256:..."}}; older engines print "Successfully built <id>".
  std::string id;
  static const std::regex built_re(R"(Successfully built ([0-9a-f]+))");
  for (const auto& p : *seen) {
    std::string aux = detail::str(detail::child(p.raw, "aux"), "ID");
    if (!aux.empty()) id = aux;
    std::smatch m;
    if (id.empty() && std::regex_search(p.stream, m, built_re)) id = m[1];
  }
  if (id.empty()) return Error(Code::kInternal, what + ": the engine reported no image id");
  return id;
}

Result<std::string> Client::import_image(const ImportSpec& spec, const ProgressFn& progress) const {
  std::string what = "import image " + spec.repo + (spec.tag.empty() ? "" : ":" + spec.tag);
  if (auto st = need_file(spec.rootfs_tar, what); !st.ok()) return st.error();
  Query q;
  q.add("fromSrc", "-").add("repo", spec.repo).add("tag", spec.tag).add("message", spec.message);
  q.add("platform", spec.platform);
  for (const auto& c : spec.changes) q.add("changes", c);
  HttpRequest r = tar_post(path("/images/create" + q.str()), spec.rootfs_tar);
  auto seen = upload_with_progress(*transport_, r, progress, what, Code::kDataError);
  if (!seen.ok()) return seen.error();
  // The last status line carries the new image id.
  for (auto it = seen->rbegin(); it != seen->rend(); ++it)
    if (starts_with(it->status, "sha256:")) return trim(it->status);
  return Error(Code::kInternal, what + ": the engine reported no image id");
}

Status Client::copy_from_container(const std::string& id, const std::string& src_path,
                                   const std::filesystem::path& dest_tar) const {
  HttpRequest r;
  r.target =
      path("/containers/" + url_encode(id) + "/archive" + Query().add("path", src_path).str());
  r.response_file = dest_tar;
  auto resp = call(*transport_, r, "copy " + src_path + " out of container " + id);
  if (!resp.ok()) {
    std::error_code ec;
    std::filesystem::remove(dest_tar, ec);
    return resp.error();
  }
  return ok_status();
}

Status Client::copy_from_container_to(const std::string& id, const std::string& src_path,
                                      const BodySink& sink,
                                      std::chrono::milliseconds timeout) const {
  HttpRequest r;
  r.target =
      path("/containers/" + url_encode(id) + "/archive" + Query().add("path", src_path).str());
  r.on_data = sink;
  r.timeout = timeout;
  const std::string what = "copy " + src_path + " out of container " + id;
  auto resp = call(*transport_, r, what);
  if (!resp.ok()) return resp.error();
  if (resp->cancelled) return Error(Code::kDataError, what + ": stopped before the end");
  return ok_status();
}

Status Client::copy_to_container(const std::string& id, const std::string& dest_dir,
                                 const std::filesystem::path& src_tar) const {
  std::string what = "copy " + src_tar.string() + " into container " + id + ":" + dest_dir;
  if (auto st = need_file(src_tar, what); !st.ok()) return st;
  HttpRequest r = tar_post(
      path("/containers/" + url_encode(id) + "/archive" + Query().add("path", dest_dir).str()),
      src_tar);
  r.method = "PUT";
  auto resp = call(*transport_, r, what);
  if (!resp.ok()) return resp.error();
  return ok_status();
}

}  // namespace gpulab::docker
