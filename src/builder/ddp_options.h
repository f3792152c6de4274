// What `gpulab ddp` is asked for (the seed's N, mode and train flags, plus where to book GPUs),
// shared by the command (ddp.h) and the GPU allocation (ddp_allocation.h).
#pragma once

#include <filesystem>
#include <string>

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

}  // namespace gpulab::builder
