// `gpulab ddp`: the seed's run-ddp.sh. Allocates N GPUs on this host (through gpulab serve when
// one runs, see ddp_allocation.h), starts a lab container
// named as the seed does (ddp-<random>-<N>-<gpu indices>) with data/ and log/ mounted, and either
// leaves it running for SSH (interactive) or runs `gpulab train` in it and removes it (script).
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "builder/ddp_options.h"
#include "core/result.h"

namespace gpulab::builder {

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
