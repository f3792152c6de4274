// The GPU lease's JSON form, written by the service and read by gpulab ddp.
#include "docker/gpu_lease.h"

namespace gpulab::docker {

Json GpuLease::to_json() const {
  Json j = {{"name", name},
            {"owner", owner},
            {"gpu_count", gpu_indices.size()},
            {"gpu_devices", gpu_indices},
            {"gpu_uuids", gpu_uuids},
            {"ssh_port", ssh_port},
            {"gpu_type", gpu_type},
            {"label", {{label, name}}},
            {"container", container ? Json(*container) : Json(nullptr)},
            {"created_at", created_at}};
  if (attachment) {
    Json reqs = Json::array(), devs = Json::array();
    for (const auto& r : attachment->device_requests)
      reqs.push_back({{"driver", r.driver}, {"device_ids", r.device_ids}});
    for (const auto& d : attachment->devices)
      devs.push_back({{"path_on_host", d.path_on_host},
                      {"path_in_container", d.path_in_container},
                      {"cgroup_permissions", d.cgroup_permissions}});
    j["attachment"] = {{"env", attachment->env}, {"device_requests", reqs}, {"devices", devs}};
  }
  if (grace_seconds) j["grace_seconds"] = *grace_seconds;
  if (engine_id) j["engine_id"] = *engine_id;
  return j;
}

Result<GpuLease> GpuLease::from_json(const Json& j) {
  try {
    GpuLease l;
    l.name = j.at("name").get<std::string>();
    l.owner = j.value("owner", std::string());
    l.gpu_indices = j.at("gpu_devices").get<std::vector<int>>();
    l.gpu_uuids = j.at("gpu_uuids").get<std::vector<std::string>>();
    l.ssh_port = j.at("ssh_port").get<int>();
    l.gpu_type = j.value("gpu_type", std::string());
    const Json& label = j.at("label");
    if (!label.is_object() || label.size() != 1)
      return Error(Code::kDataError, "lease label must be one {key: name} pair");
    l.label = label.begin().key();
    if (j.contains("container") && j["container"].is_string())
      l.container = j["container"].get<std::string>();
    l.created_at = j.value("created_at", std::string());
    if (j.contains("attachment")) {
      const Json& a = j["attachment"];
      LeaseAttachment att;
      att.env = a.at("env").get<std::vector<std::string>>();
      for (const auto& r : a.at("device_requests")) {
        GpuRequest g;
        g.driver = r.value("driver", std::string("nvidia"));
        g.device_ids = r.at("device_ids").get<std::vector<std::string>>();
        att.device_requests.push_back(g);
      }
      for (const auto& m : a.at("devices"))
        att.devices.push_back({m.at("path_on_host").get<std::string>(),
                               m.value("path_in_container", std::string()),
                               m.value("cgroup_permissions", std::string("rwm"))});
      l.attachment = std::move(att);
    }
    if (j.contains("grace_seconds")) l.grace_seconds = j["grace_seconds"].get<int>();
    if (j.contains("engine_id")) l.engine_id = j["engine_id"].get<std::string>();
    return l;
  } catch (const Json::exception& e) {
    return Error(Code::kDataError, std::string("bad lease: ") + e.what());
  }
}

}  // namespace gpulab::docker
