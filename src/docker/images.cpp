// Image calls that answer at once: commit (container snapshot), list, inspect, remove, tag.
#include "docker/client.h"
#include "docker/client_internal.h"

namespace gpulab::docker {

using detail::call;
using detail::call_json;
using detail::child;
using detail::num;
using detail::Query;
using detail::str;
using detail::string_map;
using detail::strings;

namespace detail {

ImageInfo parse_image_info(Json j) {
  ImageInfo i;
  i.id = str(j, "Id");
  i.repo_tags = strings(j, "RepoTags");
  i.created = str(j, "Created");
  i.comment = str(j, "Comment");
  i.author = str(j, "Author");
  i.os = str(j, "Os");
  i.architecture = str(j, "Architecture");
  i.size_bytes = num(j, "Size");
  const Json& config = child(j, "Config");
  i.labels = string_map(config, "Labels");
  i.env = strings(config, "Env");
  i.cmd = strings(config, "Cmd");
  i.entrypoint = strings(config, "Entrypoint");
  const Json& exposed = child(config, "ExposedPorts");
  if (exposed.is_object())
    for (auto it = exposed.begin(); it != exposed.end(); ++it) i.exposed_ports.push_back(it.key());
  i.raw = std::move(j);
  return i;
}

ImageSummary parse_image_summary(const Json& j) {
  ImageSummary s;
  s.id = str(j, "Id");
  s.repo_tags = strings(j, "RepoTags");
  std::erase(s.repo_tags, "<none>:<none>");
  s.created = num(j, "Created");
  s.size_bytes = num(j, "Size");
  s.labels = string_map(j, "Labels");
  return s;
}

}  // namespace detail

Result<std::string> Client::commit(const std::string& container, const CommitSpec& spec) const {
  Query q;
  q.add("container", container).add("repo", spec.repo).add("tag", spec.tag);
  q.add("comment", spec.comment).add("author", spec.author).add("pause", spec.pause);
  for (const auto& c : spec.changes) q.add("changes", c);
  HttpRequest r;
  r.method = "POST";
  r.target = path("/commit" + q.str());
  r.headers.emplace_back("Content-Type", "application/json");
  // The body is a container config merged over the container's own: only labels are set here.
  r.body = Json{{"Labels", spec.labels}}.dump();
  auto j = call_json(*transport_, r, "commit container " + container);
  if (!j.ok()) return j.error();
  return str(*j, "Id");
}

Result<std::vector<ImageSummary>> Client::list_images(const ImageListOptions& o) const {
  std::map<std::string, std::vector<std::string>> f{{"label", o.labels},
                                                    {"reference", o.reference}};
  if (o.dangling_only) f["dangling"] = {"true"};
  HttpRequest r;
  r.target =
      path("/images/json" + Query().add("all", o.all).add("filters", detail::filters(f)).str());
  r.timeout = std::chrono::seconds(60);
  auto j = call_json(*transport_, r, "list images");
  if (!j.ok()) return j.error();
  std::vector<ImageSummary> out;
  for (const auto& i : *j) out.push_back(detail::parse_image_summary(i));
  return out;
}

Result<ImageInfo> Client::inspect_image(const std::string& name) const {
  HttpRequest r;
  // Image names contain '/' and ':' which the engine takes literally in the path.
  r.target = path("/images/" + name + "/json");
  r.timeout = std::chrono::seconds(30);
  auto j = call_json(*transport_, r, "inspect image " + name);
  if (!j.ok()) return j.error();
  return detail::parse_image_info(std::move(*j));
}

bool Client::image_exists(const std::string& name) const {
  return inspect_image(name).ok();
}

Status Client::remove_image(const std::string& name, bool force, bool prune_parents) const {
  HttpRequest r;
  r.method = "DELETE";
  r.target =
      path("/images/" + name + Query().add("force", force).add("noprune", !prune_parents).str());
  r.timeout = std::chrono::seconds(120);
  auto resp = call(*transport_, r, "remove image " + name);
  if (!resp.ok()) return resp.error();
  return ok_status();
}

Status Client::tag_image(const std::string& name, const std::string& repo,
                         const std::string& tag) const {
  HttpRequest r;
  r.method = "POST";
  r.target = path("/images/" + name + "/tag" + Query().add("repo", repo).add("tag", tag).str());
  r.timeout = std::chrono::seconds(30);
  auto resp = call(*transport_, r, "tag image " + name + " as " + repo + ":" + tag);
  if (!resp.ok()) return resp.error();
  return ok_status();
}

}  // namespace gpulab::docker
