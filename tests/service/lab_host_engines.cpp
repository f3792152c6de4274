// Starting and addressing the lab dockerds for tests (lab_host_engines.h).
#include "lab_host_engines.h"

#include <thread>

#include "core/files.h"
#include "core/strings.h"
#include "core/subprocess.h"
#include "service_env.h"

namespace gpulab::service::testing {

namespace fs = std::filesystem;

fs::path LabHostEngine::root() const {
  return fs::path(unix_url.substr(7)).parent_path();
}

LabHostEngines start_lab_host_engines() {
  LabHostEngines lab;
  RunOptions opts;
  opts.timeout = std::chrono::seconds(180);
  auto r = run_process({"/bin/bash", gpulab::testing::dockerd_script("start-lab-hosts.sh")}, opts);
  if (!r) {
    lab.error = r.error().to_string();
    return lab;
  }
  if (r->exit_code == 77) {
    lab.skip = "cannot run the lab's dockerds here: " + r->err;
    return lab;
  }
  if (r->exit_code != 0) {
    lab.error = "start-lab-hosts.sh: " + r->err;
    return lab;
  }
  for (const auto& line : split(trim(r->out), '\n')) {
    auto f = split(line, ' ');
    if (f.size() != 4) {
      lab.error = "start-lab-hosts.sh printed '" + line + "'";
      return lab;
    }
    LabHostEngine e{f[0], f[1], f[2], f[3], std::nullopt};
    auto ep = docker::Endpoint::parse(e.unix_url);
    auto c = ep ? docker::Client::connect(*ep) : Result<docker::Client>(ep.error());
    if (!c) {
      lab.error = e.name + ": " + c.error().to_string();
      return lab;
    }
    e.client.emplace(std::move(*c));
    if (auto st = ensure_service_images(*e.client, false); !st) {
      lab.error = e.name + ": " + st.error().to_string();
      return lab;
    }
    lab.engines.push_back(std::move(e));
  }
  if (lab.engines.empty()) {
    lab.error = "start-lab-hosts.sh printed no engine";
    return lab;
  }
  lab.tls = lab.engines[0].root().parent_path() / "gpulab-lab-tls";
  return lab;
}

Json lab_host_entry(const LabHostEngines& lab, int i, int gpus) {
  const auto& e = lab.engines.at(static_cast<size_t>(i));
  Json g = Json::array();
  for (int k = 0; k < gpus; ++k)
    g.push_back(
        {{"uuid", "GPU-" + e.name + "-" + std::to_string(k)}, {"index", k}, {"vendor", "nvidia"}});
  return {{"name", e.name},
          {"url", e.tcp},
          {"tls_ca", (lab.tls / "ca.pem").string()},
          {"tls_cert", (lab.tls / "cert.pem").string()},
          {"tls_key", (lab.tls / "key.pem").string()},
          {"address", e.address},
          {"bind_ip", e.address},
          {"gpus", g}};
}

pid_t lab_engine_pid(const LabHostEngine& e) {
  auto text = read_file(e.root() / "dockerd.pid");
  if (!text) return 0;
  return static_cast<pid_t>(parse_int(trim(*text)).value_or(0));
}

void remove_lab_managed_containers(LabHostEngines& lab) {
  std::vector<std::thread> threads;
  for (auto& e : lab.engines)
    threads.emplace_back([&e] {
      if (!e.client || !e.client->ping()) return;
      docker::ListOptions lo;
      lo.all = true;
      lo.labels = {"gpulab.managed=true"};
      if (auto list = e.client->list_containers(lo))
        for (const auto& c : *list) (void)e.client->remove_container(c.id, true);
    });
  for (auto& t : threads) t.join();
}

}  // namespace gpulab::service::testing
