// The in-process lab of fake_lab.h.
#include "fake_lab.h"

#include "core/strings.h"
#include "service/api/handlers.h"
#include "service/app/server.h"
#include "service/base/crypto.h"
#include "support/docker_fixture.h"

namespace gpulab::service::testing {

namespace {

std::vector<GpuSlot> fake_gpus(const std::string& host, int count) {
  std::vector<GpuSlot> out;
  for (int i = 0; i < count; ++i) {
    GpuSlot g;
    g.uuid = "GPU-" + (host.empty() ? std::string("local") : host) + "-" + std::to_string(i);
    g.index = i;
    g.vendor = "nvidia";
    g.numa_node = i / 2;
    g.links = {i ^ 1};
    out.push_back(g);
  }
  return out;
}

}  // namespace

FakeLab::FakeLab(std::vector<HostSpec> hosts, const std::function<void(ServiceConfig&)>& tune)
    : dir_(std::filesystem::temp_directory_path() / ("gpulab-fake-" + random_secret(8))) {
  std::filesystem::create_directories(dir_);
  ServiceConfig cfg;
  cfg.db_path = db_path().string();
  cfg.backup_dir = (dir_ / "backups").string();
  cfg.ssh_port_base = gpulab::testing::unique_port_base();
  cfg.device_mode = DeviceMode::kNone;
  cfg.detect_gpus = false;  // only the declared GPUs, whatever this machine has
  cfg.image_allowlist = {"gpulab-test/*"};
  if (hosts.size() == 1 && hosts.front().name.empty()) {
    cfg.docker_host = "unix://" + (dir_ / "no-engine.sock").string();  // never reached
    cfg.gpus = fake_gpus("", hosts.front().gpus);
  } else {
    for (const auto& h : hosts) {
      HostConfig hc;
      hc.name = h.name;
      hc.url = "tcp://" + h.name + ".fake:2375";  // never reached: its engine is a FakeEngine
      hc.insecure = true;
      hc.gpus = fake_gpus(h.name, h.gpus);
      cfg.hosts.push_back(hc);
    }
  }
  if (tune) tune(cfg);
  std::map<std::string, bool> archives;
  for (const auto& h : hosts) archives[h.name.empty() ? "local" : h.name] = h.archives;
  auto open = [this, archives](
                  const ServiceConfig&, const HostConfig& host, ServiceInventory inventory,
                  std::function<void(const std::string&)>) -> Result<std::unique_ptr<Engine>> {
    auto e = std::make_unique<FakeEngine>(host.name, std::move(inventory), archives.at(host.name));
    e->add_image(kFakeImage);
    engines_[host.name] = e.get();
    return std::unique_ptr<Engine>(std::move(e));
  };
  service_ = open_service(cfg, open);
  router_ = std::make_unique<Router>(*service_->auth, &service_->metrics);
  add_routes(*router_, *service_);
}

FakeLab::~FakeLab() {
  router_.reset();
  service_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

FakeEngine& FakeLab::engine(const std::string& host) {
  return *engines_.at(host);
}

std::string FakeLab::add_user(const std::string& name, bool admin) {
  return service_->auth->issue_token(name, admin);
}

int FakeLab::engine_container_count(const std::string& prefix) const {
  int n = 0;
  for (const auto& [host, e] : engines_) {
    auto list = e->list_containers({"gpulab.managed=true"});
    if (!list) continue;
    for (const auto& c : *list) n += starts_with(c.name, prefix) ? 1 : 0;
  }
  return n;
}

HttpResult FakeLab::request(const std::string& method, const std::string& path,
                            const std::string& body, const std::string& token) const {
  ApiRequest q;
  q.method = method;
  q.path = path.substr(0, path.find('?'));
  if (auto mark = path.find('?'); mark != std::string::npos)
    for (const auto& kv : split(path.substr(mark + 1), '&')) {
      auto eq = kv.find('=');
      q.query[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
    }
  q.body = body;
  if (!token.empty()) q.authorization = "Bearer " + token;
  q.remote = "127.0.0.1";
  ApiReply reply = router_->dispatch(q);
  HttpResult out;
  out.status = reply.status;
  out.body = reply.body;
  return out;
}

}  // namespace gpulab::service::testing
