// Engine, images and per-test service for the real-dockerd service tests.
#include "service_env.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/files.h"
#include "core/strings.h"
#include "core/tar.h"
#include "service/base/crypto.h"
#include "service/ops/images/internal_images.h"

namespace gpulab::service::testing {

namespace {

// Builds `tag` unless the engine has it already; with `label` ("key=value"), an image without
// that label (made from older files) is rebuilt.
Status build(const docker::Client& c, const std::string& tag, const std::string& dockerfile,
             const std::vector<std::pair<std::string, std::string>>& files,
             const std::string& label = {}) {
  if (auto info = c.inspect_image(tag); info) {
    auto eq = label.find('=');
    if (label.empty()) return ok_status();
    auto it = info->labels.find(label.substr(0, eq));
    if (it != info->labels.end() && it->second == label.substr(eq + 1)) return ok_status();
  }
  auto ctx = std::filesystem::temp_directory_path() / ("gpulab-ctx-" + random_secret(8) + ".tar");
  {
    auto w = TarWriter::create(ctx);
    if (!w) return w.error();
    auto st = w->add_file("Dockerfile", dockerfile);
    for (const auto& [name, data] : files)
      if (st) st = w->add_file(name, data, 0755);
    if (st) st = w->finish();
    if (!st) return st;
  }
  docker::BuildSpec b;
  b.context_tar = ctx;
  b.tags = {tag};
  auto id = c.build_image(b);
  std::filesystem::remove(ctx);
  if (!id) return id.error();
  return ok_status();
}

}  // namespace

Status ensure_service_images(const docker::Client& c, bool with_ssh) {
  auto st = gpulab::testing::ensure_busybox_image(c);
  if (!st) return st;
  st = build(
      c, kBoxImage,
      std::string("FROM ") + gpulab::testing::kBusyboxImage +
          "\nCMD [\"/bin/sh\", \"-c\", \"trap 'exit 0' TERM; while true; do sleep 1; done\"]\n",
      {});
  if (!st || !with_ssh) return st;
  st = gpulab::testing::ensure_debian_ssh_image(c);
  if (!st) return st;
  auto entry = read_file(std::filesystem::path(GPULAB_SOURCE_DIR) / "images/common/entrypoint.sh");
  if (!entry) return entry.error();
  // Labeled with the entrypoint's hash, so an engine that kept an older image rebuilds it.
  std::string label = "gpulab.test.entrypoint=" + sha256_hex(*entry).substr(0, 16);
  return build(c, kSshImage,
               std::string("FROM ") + gpulab::testing::kDebianSshImage +
                   "\nCOPY entrypoint.sh /usr/local/bin/gpulab-entrypoint\n"
                   "ENTRYPOINT [\"/usr/local/bin/gpulab-entrypoint\"]\nCMD []\nLABEL " +
                   label + "\n",
               {{"entrypoint.sh", *entry}}, label);
}

namespace {

// The sample of counter `name` in /metrics (not its # TYPE line); -1 when absent.
long metrics_counter(HttpClient& c, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const std::string m = c.get("/metrics").body;
  auto at = m.find(key);
  return at == std::string::npos ? -1 : std::stol(m.substr(at + key.size()));
}

}  // namespace

long reconcile_passes(HttpClient& c) {
  return metrics_counter(c, "gpulab_reconcile_passes_total");
}

long event_watchers_started(HttpClient& c) {
  return metrics_counter(c, "gpulab_event_watchers_started_total");
}

std::map<std::string, CreatePhase> create_phases(const std::string& metrics) {
  std::map<std::string, CreatePhase> out;
  for (const auto& line : split(metrics, '\n')) {
    for (const char* part : {"_sum{", "_count{"}) {
      const std::string key = std::string("gpulab_create_phase_seconds") + part + "phase=\"";
      if (!starts_with(line, key)) continue;
      const std::string rest = line.substr(key.size());
      const double v = std::atof(rest.substr(rest.find(' ') + 1).c_str());
      auto& e = out[rest.substr(0, rest.find('"'))];
      (std::string(part) == "_sum{" ? e.seconds : e.count) = v;
    }
  }
  return out;
}

Json four_gpu_config(const std::string& docker_host, int port_base) {
  Json gpus = Json::array();
  for (int i = 0; i < 4; ++i)
    gpus.push_back({{"uuid", "GPU-fake-" + std::to_string(i)},
                    {"index", i},
                    {"vendor", "nvidia"},
                    {"numa_node", i / 2},
                    {"links", Json::array({i ^ 1})}});
  return {{"docker_host", docker_host},
          {"gpus", gpus},
          {"ssh_port_base", port_base},
          {"image_allowlist", Json::array({"gpulab-test/*"})}};
}

ServiceConfig ServiceTest::in_process_config() const {
  ServiceConfig cfg;
  cfg.docker_host = engine_->host;
  cfg.db_path = (dir_ / "service.db").string();
  cfg.backup_dir = (dir_ / "backups").string();
  cfg.ssh_port_base = unique_port_base();
  cfg.device_mode = DeviceMode::kNone;
  cfg.image_allowlist = {"gpulab-test/*"};
  return cfg;
}

void ServiceTest::SetUp() {
  // Skipped only where no engine can run (not root, no dockerd: kUnsupported); an engine that
  // should start here and does not is a broken component, and every service test fails with it.
  auto eng = gpulab::testing::main_engine();
  if (!eng && eng.error().code == Code::kUnsupported) GTEST_SKIP() << eng.error().to_string();
  ASSERT_TRUE(eng.ok()) << eng.error().to_string();
  engine_ = *eng;
  auto c = gpulab::testing::client_for(*engine_);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  client_.emplace(std::move(*c));
  dir_ = std::filesystem::temp_directory_path() / ("gpulab-svc-" + random_secret(8));
  std::filesystem::create_directories(dir_);
  prefix_ = "t" + random_secret(5);
  for (auto& ch : prefix_) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
}

void ServiceTest::start_service(Json config, bool with_ssh) {
  auto st = ensure_service_images(*client_, with_ssh);
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  svc_ = std::make_unique<ServiceProcess>(dir_, std::move(config));
  ASSERT_TRUE(svc_->start()) << svc_->log_tail();
}

int ServiceTest::engine_managed_count(const std::string& name_prefix) {
  docker::ListOptions lo;
  lo.labels = {"gpulab.managed=true"};
  auto list = client_->list_containers(lo);
  if (!list) return -1;
  int n = 0;
  for (const auto& c : *list)
    if (c.name.rfind(name_prefix, 0) == 0) ++n;
  return n;
}

void ServiceTest::TearDown() {
  if (svc_) svc_->stop();
  if (client_) {
    docker::ListOptions lo;
    lo.labels = {"gpulab.managed=true"};
    if (auto list = client_->list_containers(lo))
      for (const auto& c : *list)
        if (c.name.rfind(prefix_, 0) == 0) (void)client_->remove_container(c.id, true);
    // The internal images of this test (snapshots, backups, recreates, moves) carry its prefix.
    if (auto images = client_->list_images())
      for (const auto& img : *images)
        for (const auto& tag : img.repo_tags)
          for (const char* repo : kInternalImageRepos)
            if (tag.rfind(std::string(repo) + prefix_, 0) == 0)
              (void)client_->remove_image(tag, true);
  }
  std::error_code ec;
  if (!dir_.empty() && !::testing::Test::HasFailure()) std::filesystem::remove_all(dir_, ec);
}

}  // namespace gpulab::service::testing
