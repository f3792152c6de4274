// The Docker engine adapter's lab-container calls; see lab_engine.h.
#include "docker/lab_engine.h"

namespace gpulab::docker {

Result<LabEngine> LabEngine::connect(const Endpoint& endpoint) {
  auto client = Client::connect(endpoint);
  if (!client) return client.error();
  if (auto st = client->ping(); !st) return st.error();
  return LabEngine(std::move(*client));
}

Result<std::string> LabEngine::engine_id() const {
  auto info = client_.info();
  if (!info) return info.error();
  return info->id;
}

Result<std::string> LabEngine::make_lab_container(const CreateSpec& spec,
                                                  const std::string& ssh_password, bool start,
                                                  const HostAccess& host) const {
  auto id = client_.create_container(spec, host);
  if (!id) return id.error();
  Status st =
      ssh_password.empty() ? ok_status() : client_.put_file(*id, kLabSshPasswordFile, ssh_password);
  if (st && start) st = client_.start_container(*id);
  if (!st) {
    (void)client_.remove_container(*id, true);
    return st.error();
  }
  return *id;
}

Result<std::vector<ContainerSummary>> LabEngine::containers(const std::vector<std::string>& labels,
                                                            bool all) const {
  ListOptions lo;
  lo.all = all;
  lo.labels = labels;
  return client_.list_containers(lo);
}

Result<int> LabEngine::follow_to_exit(const std::string& ref,
                                      const std::function<void(std::string_view)>& on_chunk) const {
  LogOptions lo;
  lo.follow = true;
  (void)client_.logs_stream(ref, lo, [&](bool, std::string_view chunk) {
    on_chunk(chunk);
    return true;
  });
  return client_.wait_container(ref);
}

}  // namespace gpulab::docker
