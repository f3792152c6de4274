// The Docker adapter's image, event and lease calls: commit, image archives streamed in and out,
// the event stream, and the GPU lease in Docker's own terms (docker/gpu_lease.h).
#include <utility>

#include "core/strings.h"
#include "docker/gpu_lease.h"
#include "service/engine/docker_attachment.h"
#include "service/engine/docker_engine.h"

namespace gpulab::service {

static_assert(std::string_view(kLeaseLabel) == docker::kLeaseLabel,
              "the service and gpulab ddp must agree on the lease label");

bool DockerEngine::image_exists(const std::string& ref) const {
  return client_.image_exists(ref);
}

Result<std::string> DockerEngine::commit(const std::string& container,
                                         const ImageCommit& commit) const {
  docker::CommitSpec cs;
  cs.repo = commit.repo;
  cs.tag = commit.tag;
  cs.comment = commit.comment;
  cs.author = commit.author;
  cs.labels = commit.labels;
  cs.pause = true;
  return client_.commit(container, cs);
}

Result<EngineImage> DockerEngine::inspect_image(const std::string& ref) const {
  auto info = client_.inspect_image(ref);
  if (!info) return info.error();
  return EngineImage{info->id, info->repo_tags, info->size_bytes, info->labels};
}

Result<std::vector<EngineImage>> DockerEngine::list_images(
    const std::vector<std::string>& labels) const {
  docker::ImageListOptions lo;
  lo.labels = labels;
  auto list = client_.list_images(lo);
  if (!list) return list.error();
  std::vector<EngineImage> out;
  for (auto& i : *list)
    out.push_back(
        EngineImage{std::move(i.id), std::move(i.repo_tags), i.size_bytes, std::move(i.labels)});
  return out;
}

Status DockerEngine::remove_image(const std::string& ref) const {
  return client_.remove_image(ref);
}

Status DockerEngine::save_image(const std::string& ref,
                                const std::function<bool(std::string_view)>& sink) const {
  return client_.save_images_to({ref}, sink);
}

Result<std::vector<std::string>> DockerEngine::load_images(
    std::int64_t size, const std::function<Result<std::size_t>(char*, std::size_t)>& read) const {
  return client_.load_images_from(size, read);
}

Status DockerEngine::watch_events(const EventQuery& query,
                                  const std::function<bool(const EngineEvent&)>& on_event,
                                  const std::atomic<bool>* cancel) const {
  docker::EventFilter f;
  f.types = {"container"};
  f.labels = query.labels;
  f.events = query.actions;
  f.since = query.since;
  f.until = query.until;
  return client_.events(
      f,
      [&](const docker::Event& ev) {
        auto name = ev.attributes.find("name");
        return on_event(
            EngineEvent{ev.action, name == ev.attributes.end() ? std::string() : name->second});
      },
      cancel);
}

Json DockerEngine::lease_json(const LeaseFacts& f) const {
  docker::GpuLease l;
  l.name = f.name;
  l.owner = f.owner;
  l.gpu_indices = f.gpu_indices;
  l.gpu_uuids = f.gpu_uuids;
  l.ssh_port = f.ssh_port;
  l.gpu_type = f.gpu_type;
  l.container = f.container;
  l.created_at = f.created_at;
  if (f.attach) {
    GpuAttachment att = attachment_for(*f.attach, config_);
    l.attachment = docker::LeaseAttachment{att.env, att.requests, att.devices};
    l.grace_seconds = f.grace_seconds;
    // Lets the caller check that it creates its container on the engine the service books for.
    if (auto id = engine_id(); id) l.engine_id = *id;
  }
  return l.to_json();
}

// gpulab ddp --no-service labels its containers gpulab.kind=ddp and gpulab.gpu_indices.
std::vector<std::string> DockerEngine::gpus_held_outside() const {
  std::vector<std::string> held;
  auto list = list_containers({"gpulab.kind=ddp"});
  if (!list) return held;
  const auto inventory = gpus();
  for (const auto& c : *list) {
    if (c.labels.count(kLeaseLabel)) continue;  // booked through a lease already
    auto it = c.labels.find("gpulab.gpu_indices");
    if (it == c.labels.end()) continue;
    for (const auto& idx : split(it->second, ','))
      for (const auto& g : inventory->gpus)
        if (!idx.empty() && std::to_string(g.index) == idx) held.push_back(g.uuid);
  }
  return held;
}

}  // namespace gpulab::service
