// The JSON form of an Inventory (`gpulab detect --json`): every field always present, null when a
// source could not tell, units in the key names.
#include "gpu/inventory.h"

namespace gpulab::gpu {

namespace {

template <typename T>
OrderedJson opt(const std::optional<T>& v) {
  return v ? OrderedJson(*v) : OrderedJson(nullptr);
}

OrderedJson to_json(const HostChecks& h) {
  OrderedJson j;
  j["docker_endpoint"] = h.docker_endpoint;
  j["docker_reachable"] = opt(h.docker_reachable);
  j["docker_detail"] = h.docker_detail;
  j["nvidia_container_toolkit"] = opt(h.nvidia_toolkit);
  j["nvidia_device_nodes"] = h.nvidia_device_nodes;
  if (h.kfd) {
    j["kfd"] = OrderedJson{{"path", h.kfd->path}, {"accessible", h.kfd->accessible}};
  } else {
    j["kfd"] = nullptr;
  }
  j["render_nodes"] = OrderedJson::array();
  for (const auto& n : h.render_nodes)
    j["render_nodes"].push_back(OrderedJson{{"path", n.path}, {"accessible", n.accessible}});
  return j;
}

}  // namespace

OrderedJson to_json(const GpuInfo& g) {
  OrderedJson j;
  j["index"] = g.index;
  j["vendor"] = vendor_name(g.vendor);
  j["name"] = g.name;
  j["uuid"] = opt(g.uuid);
  j["pci_bus_id"] = opt(g.pci_bus_id);
  j["architecture"] = opt(g.architecture);
  j["compute_capability"] = opt(g.compute_capability);
  j["gfx_target"] = opt(g.gfx_target);
  j["compute_partition"] = opt(g.compute_partition);
  j["memory_partition"] = opt(g.memory_partition);
  j["driver_version"] = opt(g.driver_version);
  j["compute_units"] = opt(g.compute_units);
  j["numa_node"] = opt(g.numa_node);
  j["memory_total_bytes"] = opt(g.memory_total_bytes);
  j["memory_used_bytes"] = opt(g.memory_used_bytes);
  j["utilization_percent"] = opt(g.utilization_percent);
  j["temperature_c"] = opt(g.temperature_c);
  j["power_mw"] = opt(g.power_mw);
  j["processes"] = OrderedJson::array();
  for (const auto& p : g.processes) {
    j["processes"].push_back(OrderedJson{
        {"pid", p.pid}, {"name", p.name}, {"memory_used_bytes", opt(p.memory_used_bytes)}});
  }
  j["source"] = g.source;
  return j;
}

OrderedJson to_json(const Inventory& inv) {
  OrderedJson j;
  j["vendor"] = inv.vendor;
  j["gpu_count"] = inv.gpus.size();
  if (inv.gpus.empty()) j["reason"] = "No GPU detected: " + inv.no_gpu_reason;
  j["cuda_version"] = opt(inv.cuda_version);
  j["rocm_version"] = opt(inv.rocm_version);
  j["gpus"] = OrderedJson::array();
  for (const auto& g : inv.gpus) j["gpus"].push_back(to_json(g));
  j["links"] = OrderedJson::array();
  for (const auto& l : inv.links) {
    j["links"].push_back(OrderedJson{{"vendor", vendor_name(l.vendor)},
                                     {"a", l.a},
                                     {"b", l.b},
                                     {"type", l.type},
                                     {"lanes", opt(l.lanes)},
                                     {"hops", opt(l.hops)},
                                     {"weight", opt(l.weight)}});
  }
  j["backends"] = OrderedJson::array();
  for (const auto& b : inv.backends) {
    j["backends"].push_back(OrderedJson{{"name", b.name},
                                        {"vendor", b.vendor},
                                        {"status", b.status},
                                        {"devices", b.devices},
                                        {"reason", b.reason}});
  }
  j["host"] = inv.host ? to_json(*inv.host) : OrderedJson(nullptr);
  j["root"] = inv.root.empty() ? OrderedJson(nullptr) : OrderedJson(inv.root);
  return j;
}

}  // namespace gpulab::gpu
