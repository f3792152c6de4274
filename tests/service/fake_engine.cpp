// The in-memory engine of fake_engine.h.
#include "fake_engine.h"

#include <chrono>
#include <ctime>
#include <thread>

#include "core/strings.h"

namespace gpulab::service::testing {

namespace {

// "busybox" and "busybox:latest" are one image, as on Docker.
std::string full_ref(const std::string& ref) {
  const auto slash = ref.rfind('/');
  const auto colon = ref.rfind(':');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash))
    return ref + ":latest";
  return ref;
}

// Whether `labels` carry every filter ("key" or "key=value").
bool has_labels(const std::map<std::string, std::string>& labels,
                const std::vector<std::string>& filters) {
  for (const auto& f : filters) {
    const auto eq = f.find('=');
    const auto it = labels.find(f.substr(0, eq));
    if (it == labels.end()) return false;
    if (eq != std::string::npos && it->second != f.substr(eq + 1)) return false;
  }
  return true;
}

}  // namespace

FakeEngine::FakeEngine(std::string name, ServiceInventory inventory, bool archives)
    : name_(std::move(name)),
      inventory_(std::make_shared<const ServiceInventory>(std::move(inventory))),
      archives_(archives) {}

void FakeEngine::add_image(const std::string& ref,
                           std::map<std::string, std::string> labels) const {
  std::lock_guard<std::mutex> g(mu_);
  images_[full_ref(ref)] = Image{"sha256:" + name_ + "-" + ref, std::move(labels)};
}

void FakeEngine::set_held_outside(std::vector<std::string> uuids) {
  std::lock_guard<std::mutex> g(mu_);
  held_outside_ = std::move(uuids);
}

int FakeEngine::calls(const std::string& method) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

void FakeEngine::reset_calls() {
  std::lock_guard<std::mutex> g(mu_);
  calls_.clear();
}

std::size_t FakeEngine::container_count() const {
  std::lock_guard<std::mutex> g(mu_);
  return boxes_.size();
}

Status FakeEngine::enter(const char* method) const {
  std::lock_guard<std::mutex> g(mu_);
  ++calls_[method];
  if (down_) return Error(Code::kUnavailable, describe() + " is down", unavailable_hint());
  return ok_status();
}

FakeEngine::Box* FakeEngine::find(const std::string& ref) const {
  if (auto it = boxes_.find(ref); it != boxes_.end()) return &it->second;
  for (auto& [id, box] : boxes_)
    if (box.info.name == ref) return &box;
  return nullptr;
}

Status FakeEngine::ping() const {
  return enter("ping");
}

Result<std::string> FakeEngine::engine_id() const {
  if (auto st = enter("engine_id"); !st) return st.error();
  return "FAKE-" + name_;
}

Result<std::shared_ptr<const ServiceInventory>> FakeEngine::probe_gpus(const GpuProbe&) const {
  if (auto st = enter("probe_gpus"); !st) return st.error();
  return inventory_;
}

Result<std::string> FakeEngine::make(const LabContainer& spec, const char* state) const {
  std::lock_guard<std::mutex> g(mu_);
  if (!images_.count(full_ref(spec.image)))
    return Error(Code::kNotFound, "No such image: " + spec.image);
  std::set<int> ports = {spec.ssh_port};
  for (const auto& p : spec.ports) ports.insert(p.host_port);
  ports.erase(0);
  for (const auto& [id, box] : boxes_) {
    if (box.info.name == spec.name)
      return Error(Code::kAlreadyExists, "The container name \"/" + spec.name + "\" is in use");
    for (int p : ports)
      if (box.host_ports.count(p) && box.info.state == "running")
        return Error(Code::kConflict, "Bind for 0.0.0.0:" + std::to_string(p) +
                                          " failed: port is already allocated");
  }
  const std::string id = name_ + "-" + std::to_string(++next_id_) + "-" + spec.name;
  boxes_[id] = Box{EngineContainer{id, spec.name, spec.image, state, "", spec.labels, {}}, ports};
  return id;
}

Result<std::string> FakeEngine::run_container(const LabContainer& spec, const std::string&) const {
  if (auto st = enter("run_container"); !st) return st.error();
  return make(spec, "running");
}

Result<std::string> FakeEngine::create_container(const LabContainer& spec,
                                                 const std::string&) const {
  if (auto st = enter("create_container"); !st) return st.error();
  return make(spec, "created");
}

Status FakeEngine::set_state(const char* method, const std::string& ref, const char* state) const {
  if (auto st = enter(method); !st) return st;
  std::lock_guard<std::mutex> g(mu_);
  Box* b = find(ref);
  if (!b) return Error(Code::kNotFound, "No such container: " + ref);
  b->info.state = state;
  return ok_status();
}

Status FakeEngine::start_container(const std::string& ref) const {
  return set_state("start_container", ref, "running");
}

Status FakeEngine::stop_container(const std::string& ref, int) const {
  return set_state("stop_container", ref, "exited");
}

Status FakeEngine::restart_container(const std::string& ref, int) const {
  return set_state("restart_container", ref, "running");
}

Status FakeEngine::remove_container(const std::string& ref) const {
  if (auto st = enter("remove_container"); !st) return st;
  std::lock_guard<std::mutex> g(mu_);
  Box* b = find(ref);
  if (!b) return Error(Code::kNotFound, "No such container: " + ref);
  boxes_.erase(b->info.id);
  return ok_status();
}

Result<EngineContainer> FakeEngine::inspect_container(const std::string& ref) const {
  if (auto st = enter("inspect_container"); !st) return st.error();
  std::lock_guard<std::mutex> g(mu_);
  const Box* b = find(ref);
  if (!b) return Error(Code::kNotFound, "No such container: " + ref);
  return b->info;
}

Result<std::vector<EngineContainer>> FakeEngine::list_containers(
    const std::vector<std::string>& labels) const {
  if (auto st = enter("list_containers"); !st) return st.error();
  std::lock_guard<std::mutex> g(mu_);
  std::vector<EngineContainer> out;
  for (const auto& [id, box] : boxes_)
    if (has_labels(box.info.labels, labels)) out.push_back(box.info);
  return out;
}

Status FakeEngine::update_container(const std::string& ref, const ResourceChange&) const {
  return set_state("update_container", ref, "running");
}

Result<LogText> FakeEngine::logs(const std::string& ref, const LogQuery&) const {
  if (auto c = inspect_container(ref); !c) return c.error();
  return LogText{"", ""};
}

Result<ContainerUsage> FakeEngine::usage(const std::string& ref) const {
  auto c = inspect_container(ref);
  if (!c) return c.error();
  if (c->state != "running") return Error(Code::kConflict, "container " + ref + " is not running");
  return ContainerUsage{};
}

Result<ExecOutput> FakeEngine::exec(const std::string& ref, const std::vector<std::string>&) const {
  if (auto c = inspect_container(ref); !c) return c.error();
  return ExecOutput{0, "", ""};
}

bool FakeEngine::image_exists(const std::string& ref) const {
  if (!enter("image_exists")) return false;
  std::lock_guard<std::mutex> g(mu_);
  return images_.count(full_ref(ref)) > 0;
}

Result<EngineImage> FakeEngine::inspect_image(const std::string& ref) const {
  if (auto st = enter("inspect_image"); !st) return st.error();
  std::lock_guard<std::mutex> g(mu_);
  auto it = images_.find(full_ref(ref));
  if (it == images_.end()) return Error(Code::kNotFound, "No such image: " + ref);
  return EngineImage{it->second.id, {it->first}, 1 << 20, it->second.labels};
}

Result<std::vector<EngineImage>> FakeEngine::list_images(
    const std::vector<std::string>& labels) const {
  if (auto st = enter("list_images"); !st) return st.error();
  std::lock_guard<std::mutex> g(mu_);
  std::vector<EngineImage> out;
  for (const auto& [ref, image] : images_)
    if (has_labels(image.labels, labels))
      out.push_back(EngineImage{image.id, {ref}, 1 << 20, image.labels});
  return out;
}

Status FakeEngine::remove_image(const std::string& ref) const {
  if (auto st = enter("remove_image"); !st) return st;
  std::lock_guard<std::mutex> g(mu_);
  if (!images_.erase(full_ref(ref))) return Error(Code::kNotFound, "No such image: " + ref);
  return ok_status();
}

Result<std::string> FakeEngine::commit(const std::string& container,
                                       const ImageCommit& commit) const {
  if (auto st = enter("commit"); !st) return st.error();
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!find(container)) return Error(Code::kNotFound, "No such container: " + container);
  }
  add_image(commit.repo + ":" + commit.tag, commit.labels);
  return "sha256:" + name_ + "-" + commit.tag;
}

// An archive is the image's name and labels as JSON: enough for a load on another fake.
Status FakeEngine::save_image(const std::string& ref,
                              const std::function<bool(std::string_view)>& sink) const {
  if (auto st = enter("save_image"); !st) return st;
  std::string body;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = images_.find(full_ref(ref));
    if (it == images_.end()) return Error(Code::kNotFound, "No such image: " + ref);
    body = Json{{"ref", it->first}, {"labels", it->second.labels}}.dump();
  }
  if (!sink(body)) return Error(Code::kDataError, "save of " + ref + " stopped by its reader");
  return ok_status();
}

Result<std::vector<std::string>> FakeEngine::load_images(
    std::int64_t, const std::function<Result<std::size_t>(char*, std::size_t)>& read) const {
  if (auto st = enter("load_images"); !st) return st.error();
  std::string body;
  char buf[4096];
  for (;;) {
    auto n = read(buf, sizeof buf);
    if (!n) return n.error();
    if (*n == 0) break;
    body.append(buf, *n);
  }
  Json j = Json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("ref"))
    return Error(Code::kDataError, "not an image archive of the fake engine");
  add_image(j["ref"].get<std::string>(), j.value("labels", std::map<std::string, std::string>{}));
  return std::vector<std::string>{j["ref"].get<std::string>()};
}

Status FakeEngine::watch_events(const EventQuery& query,
                                const std::function<bool(const EngineEvent&)>&,
                                const std::atomic<bool>* cancel) const {
  if (auto st = enter("watch_events"); !st) return st;
  // No events happen on their own here: wait out the query as a quiet engine would.
  while (!(cancel && cancel->load())) {
    if (query.until > 0 && std::time(nullptr) >= query.until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ok_status();
}

Json FakeEngine::lease_json(const LeaseFacts& lease) const {
  return Json{{"name", lease.name},
              {"owner", lease.owner},
              {"gpu_indices", lease.gpu_indices},
              {"gpu_uuids", lease.gpu_uuids},
              {"ssh_port", lease.ssh_port},
              {"engine_id", "FAKE-" + name_}};
}

std::vector<std::string> FakeEngine::gpus_held_outside() const {
  if (!enter("gpus_held_outside")) return {};
  std::lock_guard<std::mutex> g(mu_);
  return held_outside_;
}

}  // namespace gpulab::service::testing
