// gpulab ddp: GPU choice, container naming, mounts and the script/interactive runs.
#include "builder/ddp.h"

#include <ctime>
#include <ostream>

#include "builder/ddp_allocation.h"
#include "builder/engine.h"
#include "core/flag_checks.h"
#include "core/random.h"
#include "core/strings.h"
#include "gpu/detect.h"
#include "gpu/partition.h"

namespace gpulab::builder {

namespace fs = std::filesystem;

namespace {

bool is_mode(const std::string& s) {
  return s == "interactive" || s == "script_single_node" || s == "script_multi_node";
}

DdpMode mode_of(const std::string& s) {
  if (s == "script_single_node") return DdpMode::kScriptSingleNode;
  if (s == "script_multi_node") return DdpMode::kScriptMultiNode;
  return DdpMode::kInteractive;
}

bool data_present(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  return fs::directory_iterator(dir, ec) != fs::directory_iterator();
}

std::string today() {
  std::time_t t = std::time(nullptr);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", std::localtime(&t));
  return buf;
}

}  // namespace

DdpOptions parse_ddp_args(const std::vector<std::string>& args, DdpOptions o) {
  if (args.empty()) {
    throw Exception(Code::kInvalidArgument, "missing the number of GPUs",
                    "usage: gpulab ddp N [interactive|script_single_node|script_multi_node] "
                    "[MASTER_ADDR] [\"train flags\"]");
  }
  const auto gpus = parse_int(args[0]);
  if (!gpus)
    throw Exception(Code::kInvalidArgument, "N must be a number of GPUs, got '" + args[0] + "'");
  if (*gpus < 1 || *gpus > 8) {
    throw Exception(Code::kInvalidArgument, "N must be between 1 and 8 GPUs per node");
  }
  o.gpus = static_cast<int>(*gpus);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (is_mode(a)) {
      o.mode = mode_of(a);
    } else if (a == "auto") {
      // The seed's placeholder for automatic GPU choice: that is what gpulab always does.
    } else if (starts_with(a, "-") || a.find(' ') != std::string::npos) {
      o.train_flags = a;
    } else if (o.master_addr.empty()) {
      o.master_addr = a;
    } else {
      throw Exception(Code::kInvalidArgument, "unexpected argument '" + a + "'",
                      "quote the training flags as one argument: \"--model resnet18 ...\"");
    }
  }
  if (o.mode == DdpMode::kScriptMultiNode && o.master_addr.empty()) {
    throw Exception(Code::kInvalidArgument, "script_multi_node needs the master's address",
                    "gpulab ddp 8 auto 192.168.1.100 script_multi_node \"--model ...\"");
  }
  // The flags gpulab train's launcher gets in the container, checked the way it checks them
  // (launch/launch_flags.h), before any container starts.
  if (auto s = flag_in_range("nnodes", o.nnodes, 1, 65536); !s) throw Exception(s.error());
  const int last_node = o.mode == DdpMode::kScriptMultiNode ? o.nnodes - 1 : 65535;
  if (o.node_rank < -1 || o.node_rank > last_node)
    throw Exception(Code::kInvalidArgument,
                    "--node_rank " + std::to_string(o.node_rank) + " is outside 0.." +
                        std::to_string(last_node),
                    "leave it out to have it found (0 when MASTER_ADDR is this host)");
  if (auto s = flag_in_range("master_port", o.master_port, 1, 65535); !s)
    throw Exception(s.error());
  return o;
}

namespace {

// Step 1. Data first: nothing is allocated for a run that cannot start.
void require_data(const DdpOptions& opts, const fs::path& data, const fs::path& logs) {
  if (!data_present(data)) {
    throw Exception(Code::kNotFound,
                    "Training data not found in " + opts.data_dir.string() + " directory",
                    "fetch it with: gpulab data get cifar100 --dir " + opts.data_dir.string());
  }
  fs::create_directories(logs);
}

// Step 2. GPUs on this host and the lab image's vendor; MI300X must be in NPS1 + SPX, as the
// seed requires.
gpu::Inventory detect_gpus(const DdpOptions& opts, std::string& vendor) {
  gpu::DetectOptions d;
  d.root = opts.detect_root;
  d.host_checks = false;
  auto inv = gpu::detect(d);
  bool amd = false, nvidia = false;
  for (const auto& g : inv.gpus) (g.vendor == gpu::Vendor::kAmd ? amd : nvidia) = true;
  if (amd) gpu::require_partition("NPS1,SPX", d);
  vendor = nvidia ? "nvidia" : amd ? "rocm" : "cpu";
  return inv;
}

// Step 3. The engine, and the lab image on it.
docker::LabEngine engine_with_image(const DdpOptions& opts, const std::string& image,
                                    const std::string& vendor) {
  docker::LabEngine engine = connect_engine(opts.docker_host);
  if (!engine.image_exists(image)) {
    throw Exception(Code::kNotFound, "image " + image + " is not on the engine",
                    "build it first: gpulab image build --vendor " + vendor + " -y");
  }
  return engine;
}

// The seed's `gpulab train` command line inside the container, teed into the log folder.
std::vector<std::string> script_command(const DdpOptions& opts, const DdpResult& res,
                                        docker::HostAccess& host) {
  std::string cmd = "gpulab train --nproc_per_node " + std::to_string(opts.gpus) +
                    " --data_dir /workspace/data --output_dir /workspace/log/" + res.container;
  if (opts.mode == DdpMode::kScriptMultiNode) {
    int node_rank = opts.node_rank < 0 ? 0 : opts.node_rank;
    cmd += " --nnodes " + std::to_string(opts.nnodes) + " --node_rank " +
           std::to_string(node_rank) + " --master_addr " + opts.master_addr + " --master_port " +
           std::to_string(opts.master_port);
    host.host_network = true;  // ranks on other nodes connect to this one directly
  }
  cmd += " " + opts.train_flags;
  return {"bash", "-o", "pipefail", "-c",
          cmd + " 2>&1 | tee /workspace/log/" + res.log_file.filename().string()};
}

// Step 4b. The container: name, labels, mounts, GPUs and devices of the grant, SSH port, command.
docker::CreateSpec container_spec(const DdpOptions& opts, const DdpGrant& grant,
                                  const std::string& image, const fs::path& data,
                                  const fs::path& logs, DdpResult& res, docker::HostAccess& host) {
  std::vector<std::string> idx;
  for (int i : res.gpu_indices) idx.push_back(std::to_string(i));
  // The lease is ddp-<random>; the container adds the seed's -<N>-<gpu indices>.
  std::string base = grant.lease.empty() ? "ddp-" + random_string(5, kNameAlphabet) : grant.lease;
  res.container =
      base + "-" + std::to_string(opts.gpus) + "-" + (idx.empty() ? "cpu" : join(idx, "-"));
  // Container names are at most docker::kMaxContainerNameLength (64) characters: past about 20
  // GPUs (MI300X CPX partitions) the list becomes first-to-last; the label keeps every index.
  if (res.container.size() > docker::kMaxContainerNameLength)
    res.container =
        base + "-" + std::to_string(opts.gpus) + "-" + idx.front() + "-to-" + idx.back();
  res.log_file = logs / (today() + "_" + res.container + ".log");

  docker::CreateSpec spec;
  spec.name = res.container;
  spec.image = image;
  spec.labels = {
      {"gpulab.managed", "true"}, {"gpulab.kind", "ddp"}, {"gpulab.gpu_indices", join(idx, ",")}};
  for (const auto& [k, v] : grant.labels) spec.labels[k] = v;
  // Mounts and the host network are for this trusted local tool only; the REST service never
  // passes a HostAccess, so no request can reach the host this way.
  host.mounts = {{data.string(), "/workspace/data", false},
                 {logs.string(), "/workspace/log", false}};
  spec.shm_size_bytes = 8LL << 30;  // DataLoader-style workers need more than 64 MiB of /dev/shm
  spec.init = true;
  spec.gpus = grant.gpu_requests;
  spec.devices = grant.devices;
  spec.group_add = grant.group_add;
  spec.env = grant.env;
  if (res.ssh_port > 0) spec.ports.push_back({22, "tcp", res.ssh_port, "0.0.0.0"});
  if (opts.mode != DdpMode::kInteractive) {
    spec.cmd = script_command(opts, res, host);
  } else {
    // As the seed's `docker run --rm`: `docker stop` ends the session and removes the container.
    spec.auto_remove = true;
    res.ssh_password =
        opts.ssh_password.empty()
            ? random_string(16, "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
            : opts.ssh_password;
  }
  return spec;
}

// Step 5. Create, put the password in, start, as the service's containers are made (the
// adapter's one sequence); a failure removes what was created.
std::string start_container(const docker::LabEngine& engine, const docker::CreateSpec& spec,
                            const docker::HostAccess& host, const DdpResult& res) {
  auto id = engine.make_lab_container(spec, res.ssh_password, /*start=*/true, host);
  if (!id.ok()) throw Exception(id.error());
  return *id;
}

// Step 6a. Interactive: the seed's box with the SSH details.
void print_interactive(const DdpOptions& opts, const DdpResult& res, std::ostream& out) {
  const bool cpu = res.gpu_indices.empty();
  std::vector<std::string> idx;
  for (int i : res.gpu_indices) idx.push_back(std::to_string(i));
  out << "======================================\n"
      << "\u25a0 DDP Training container started successfully!\n"
      << "\u2022 Container name: " << res.container << "\n"
      << "\u2022 GPUs allocated: " << (cpu ? 0 : opts.gpus) << "\n"
      << "\u2022 GPU indices: " << (cpu ? "none (CPU ranks)" : join(idx, ",")) << "\n"
      << "\u2022 SSH Connection: ssh root@localhost -p " << res.ssh_port << "\n"
      << "\u2022 SSH password: " << res.ssh_password << "\n"
      << "\u2022 Done: docker stop " << res.container << " (it removes itself)\n"
      << "======================================\n";
  if (!res.lease.empty())
    out << "GPUs and port stay booked in gpulab serve (lease " << res.lease
        << ") until the container is removed\n";
}

// Step 6b. Script: follow the training's output, then remove the container whatever happened.
int follow_script(const docker::LabEngine& engine, const std::string& id, const DdpOptions& opts,
                  const DdpResult& res, std::ostream& out) {
  out << "Started " << res.container << " (" << opts.gpus
      << " ranks); log: " << res.log_file.string() << "\n"
      << std::flush;
  auto code =
      engine.follow_to_exit(id, [&](std::string_view chunk) { out << chunk << std::flush; });
  const int exit_code = code.ok() ? *code : 1;
  (void)engine.remove(id);
  out << "Container " << res.container << " finished with exit code " << exit_code
      << " and was removed\n";
  return exit_code;
}

}  // namespace

DdpResult run_ddp(const DdpOptions& opts, std::ostream& out) {
  const fs::path data = fs::absolute(opts.data_dir), logs = fs::absolute(opts.log_dir);
  require_data(opts, data, logs);
  std::string vendor;
  const gpu::Inventory inv = detect_gpus(opts, vendor);
  const std::string image = opts.image.empty() ? vendor + "-lab:latest" : opts.image;
  const docker::LabEngine engine = engine_with_image(opts, image, vendor);

  // Step 4. GPUs and the SSH port (multi-node shares the host's network: no port to publish).
  DdpAllocator alloc(opts, engine, inv, out);
  DdpGrant grant = alloc.allocate(opts.gpus, opts.mode != DdpMode::kScriptMultiNode);
  DdpResult res;
  res.gpu_indices = grant.gpu_indices;
  res.ssh_port = grant.ssh_port;
  res.lease = grant.lease;
  // Until the container runs, a failure gives the lease back at once.
  struct ReleaseOnThrow {
    DdpAllocator& a;
    DdpGrant& g;
    std::ostream& o;
    bool armed = true;
    ~ReleaseOnThrow() {
      if (armed) a.release(g, o);
    }
  } guard{alloc, grant, out};
  docker::HostAccess host;
  const docker::CreateSpec spec = container_spec(opts, grant, image, data, logs, res, host);
  const std::string id = start_container(engine, spec, host, res);
  guard.armed = false;

  if (opts.mode == DdpMode::kInteractive) {
    print_interactive(opts, res, out);
    return res;
  }
  res.exit_code = follow_script(engine, id, opts, res, out);
  alloc.release(grant, out);
  return res;
}

}  // namespace gpulab::builder
