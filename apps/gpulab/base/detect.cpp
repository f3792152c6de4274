// `gpulab detect [--json] [--root DIR] [--require-partition LIST]`: lists the GPUs, their links
// and the host's container readiness; optionally insists on AMD partition modes.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "core/strings.h"
#include "core/table.h"
#include "gpu/detect.h"
#include "gpu/partition.h"
#include "json_stdout.h"
#if defined(GPULAB_WITH_SERVICE) || defined(GPULAB_WITH_BUILDER)
#include "docker/engine_probe.h"
#endif

namespace gpulab::cli {

namespace {

// The engine check for the host report, through the Docker client when this build has one.
gpu::DockerProbe docker_probe() {
#if defined(GPULAB_WITH_SERVICE) || defined(GPULAB_WITH_BUILDER)
  return [] {
    docker::EngineProbe p = docker::probe_engine_from_env();
    return gpu::DockerStatus{p.endpoint, p.reachable, p.detail};
  };
#else
  return {};
#endif
}

struct DetectArgs {
  bool json = false;
  std::string root;
  std::string require_partition;
  bool no_host = false;
};

std::string gib(std::uint64_t bytes) {
  double g = static_cast<double>(bytes) / (1024.0 * 1024 * 1024);
  char buf[32];
  if (std::fabs(g - std::round(g)) < 0.05) {
    std::snprintf(buf, sizeof buf, "%.0f GiB", g);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GiB", g);
  }
  return buf;
}

std::string or_dash(const std::optional<std::string>& s) {
  return s ? *s : "-";
}

std::string print_gpus(const gpu::Inventory& inv) {
  TextTable t({"IDX", "VENDOR", "NAME", "MEMORY", "TARGET", "PARTITION", "CUs/SMs", "DRIVER",
               "PCI BUS", "NUMA"});
  for (const auto& g : inv.gpus) {
    std::string target = g.gfx_target           ? *g.gfx_target
                         : g.compute_capability ? "cc " + *g.compute_capability
                                                : "-";
    std::string part = g.memory_partition || g.compute_partition
                           ? or_dash(g.memory_partition) + "/" + or_dash(g.compute_partition)
                           : "-";
    t.add_row({std::to_string(g.index), gpu::vendor_name(g.vendor), g.name,
               g.memory_total_bytes ? gib(*g.memory_total_bytes) : "-", target, part,
               g.compute_units ? std::to_string(*g.compute_units) : "-", or_dash(g.driver_version),
               or_dash(g.pci_bus_id), g.numa_node ? std::to_string(*g.numa_node) : "-"});
  }
  return t.render();
}

void print_human(const gpu::Inventory& inv) {
  std::string where = inv.root.empty() ? "" : " (captured tree " + inv.root + ")";
  if (inv.empty()) {
    std::cout << "No GPU detected: " << inv.no_gpu_reason << where << "\n";
  } else {
    std::cout << "GPU vendor: " << inv.vendor << ", " << inv.gpus.size()
              << (inv.gpus.size() == 1 ? " GPU" : " GPUs") << where << "\n";
    if (inv.cuda_version) std::cout << "CUDA (driver): " << *inv.cuda_version << "\n";
    if (inv.rocm_version) std::cout << "ROCm: " << *inv.rocm_version << "\n";
    std::cout << "\n" << print_gpus(inv);
    if (!inv.links.empty()) {
      std::cout << "\nLinks:\n";
      for (const auto& l : inv.links) {
        std::string extra;
        if (l.lanes) extra += " x" + std::to_string(*l.lanes);
        if (l.hops) extra += " hops " + std::to_string(*l.hops);
        if (l.weight) extra += " weight " + std::to_string(*l.weight);
        // On a mixed host both vendors have a GPU0: say whose link it is.
        std::string who =
            inv.vendor == "mixed" ? std::string(gpu::vendor_name(l.vendor)) + " " : "";
        std::cout << "  " << who << "GPU" << l.a << " <-> GPU" << l.b << "  " << l.type << extra
                  << "\n";
      }
    }
  }
  std::cout << "\nSources:\n";
  for (const auto& b : inv.backends) {
    std::cout << "  " << b.name << ": " << b.status;
    if (b.devices > 0)
      std::cout << " (" << b.devices << (b.devices == 1 ? " device)" : " devices)");
    if (!b.reason.empty()) std::cout << " - " << b.reason;
    std::cout << "\n";
  }
  if (inv.host) {
    const auto& h = *inv.host;
    std::cout << "\nHost:\n";
    std::string engine = !h.docker_reachable   ? "not checked"
                         : *h.docker_reachable ? "reachable"
                                               : "not reachable";
    std::cout << "  Docker engine: " << engine << " at " << h.docker_endpoint
              << (h.docker_detail.empty() ? "" : " (" + h.docker_detail + ")") << "\n";
    std::cout << "  NVIDIA container toolkit: "
              << (h.nvidia_toolkit ? *h.nvidia_toolkit : std::string("not found")) << "\n";
    std::cout << "  /dev/nvidiactl: " << (h.nvidia_device_nodes ? "present" : "absent") << "\n";
    std::cout << "  /dev/kfd: "
              << (h.kfd ? (h.kfd->accessible ? "present, read/write" : "present, NOT accessible")
                        : "absent")
              << "\n";
    std::vector<std::string> nodes;
    for (const auto& n : h.render_nodes)
      nodes.push_back(n.path + (n.accessible ? "" : " (NOT accessible)"));
    std::cout << "  /dev/dri/renderD*: " << (nodes.empty() ? "none" : join(nodes, ", ")) << "\n";
  }
}

void run_detect(const DetectArgs& a) {
  gpu::DetectOptions opts;
  if (!a.root.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(a.root, ec)) {
      throw Exception(Code::kInvalidArgument, "--root " + a.root + " is not a directory",
                      "point --root at a captured tree (sysfs/procfs files, commands/*)");
    }
    opts.root = a.root;
  }
  opts.host_checks = !a.no_host;
  opts.docker_probe = docker_probe();
  // Parse the requirement first: a typo should not cost a detection run.
  std::optional<gpu::PartitionRequirement> req;
  if (!a.require_partition.empty())
    req = gpu::parse_partition_requirement(a.require_partition).value_or_throw();

  JsonStdout out(a.json);
  gpu::Inventory inv = gpu::detect(opts);
  if (a.json) {
    out.emit(gpu::to_json(inv).dump(2));
  } else {
    print_human(inv);
  }
  std::cout.flush();
  if (req) {
    Status st = gpu::check_partition(inv, *req);
    if (!st) throw Exception(st.error());
    if (!a.json) std::cout << "\nPartition check passed: " << a.require_partition << "\n";
  }
}

}  // namespace

void add_detect_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<DetectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "detect", "Find the GPUs (NVIDIA, AMD), their links and the host's container readiness");
  cmd->add_flag("--json", args->json, "print the inventory as JSON");
  cmd->add_option("--root", args->root,
                  "read a captured tree (sysfs/procfs files, commands/nvidia-smi-q-x.xml, "
                  "commands/rocm-smi.json) instead of the live system");
  cmd->add_option("--require_partition,--require-partition", args->require_partition,
                  "fail unless every AMD GPU is in these modes, e.g. NPS1,SPX");
  cmd->add_flag("--no_host,--no-host", args->no_host,
                "skip the Docker / toolkit / device-node checks");
  cmd->callback([args] { run_detect(*args); });
  (void)ctx;
}

}  // namespace gpulab::cli
