// `gpulab ddp`: the seed's run-ddp.sh. Allocates N GPUs on this host (through gpulab serve when
// one runs, see ddp_allocation.h), starts a lab container
// named as the seed does (ddp-<random>-<N>-<gpu indices>) with data/ and log/ mounted, and either
// leaves it running for SSH (interactive) or runs `gpulab train` in it and removes it (script).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::builder {

enum class DdpMode { kInteractive, kScriptSingleNode, kScriptMultiNode };

struct DdpOptions {
  int gpus = 1;  // N: ranks (GPUs) on this node
  DdpMode mode = DdpMode::kInteractive;
  std::string master_addr;  // multi-node
  int master_port = 29500;
  int nnodes = 2;           // multi-node
  int node_rank = -1;       // multi-node; -1: 0 when master_addr is this host
  std::string train_flags;  // passed to gpulab train as written
  std::string image;        // empty: <vendor>-lab
  std::filesystem::path data_dir = "data";
  std::filesystem::path log_dir = "log";
  int ssh_port_base = 2200;  // the seed's ports: 2211, 2222, ...
  std::string docker_host;
  std::filesystem::path detect_root;  // captured tree for detection (tests)
  std::string ssh_password;           // empty: a random one (interactive)
  // gpulab serve to book GPUs and the SSH port through (empty: try the default URL); the token
  // when it requires one. no_service: always allocate directly on the engine.
  std::string service_url;
  std::string token;
  bool no_service = false;
};

struct DdpResult {
  std::string container;
  std::vector<int> gpu_indices;
  int ssh_port = 0;
  std::string ssh_password;
  std::filesystem::path log_file;
  int exit_code = 0;  // script modes: the training's exit code
  std::string lease;  // the lease in gpulab serve ("" when allocated directly)
};

// Parses the seed's positional form: N [mode] [auto] [MASTER_ADDR] ["train flags"].
DdpOptions parse_ddp_args(const std::vector<std::string>& args, DdpOptions base = {});

DdpResult run_ddp(const DdpOptions& opts, std::ostream& out);

}  // namespace gpulab::builder
