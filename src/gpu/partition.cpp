// Checks AMD memory (NPSx) and compute (xPX) partition modes against a requirement (partition.h).
#include "gpu/partition.h"

#include <set>

#include "core/strings.h"
#include "gpu/detect.h"

namespace gpulab::gpu {

namespace {

bool is_memory_mode(const std::string& t) {
  return t == "NPS1" || t == "NPS2" || t == "NPS4" || t == "NPS8";
}
bool is_compute_mode(const std::string& t) {
  return t == "SPX" || t == "DPX" || t == "TPX" || t == "QPX" || t == "CPX";
}

std::string mode_pair(const GpuInfo& g) {
  return g.memory_partition.value_or("unknown") + ", " + g.compute_partition.value_or("unknown");
}

}  // namespace

Result<PartitionRequirement> parse_partition_requirement(std::string_view list) {
  PartitionRequirement req;
  for (const auto& raw : split(list, ',')) {
    std::string t = to_upper(trim(raw));
    if (t.empty()) continue;
    std::optional<std::string>& slot = is_memory_mode(t) ? req.memory : req.compute;
    if (!is_memory_mode(t) && !is_compute_mode(t)) {
      return Error{Code::kInvalidArgument, "unknown partition mode '" + t + "'",
                   "memory modes: NPS1, NPS2, NPS4, NPS8; compute modes: SPX, DPX, TPX, QPX, CPX"};
    }
    if (slot && *slot != t) {
      return Error{Code::kInvalidArgument,
                   "conflicting partition modes '" + *slot + "' and '" + t + "'",
                   "name at most one memory mode and one compute mode, e.g. NPS1,SPX"};
    }
    slot = t;
  }
  if (!req.memory && !req.compute) {
    return Error{Code::kInvalidArgument, "empty partition requirement",
                 "e.g. --require-partition NPS1,SPX"};
  }
  return req;
}

Status check_partition(const Inventory& inv, const PartitionRequirement& req) {
  std::vector<const GpuInfo*> amd;
  for (const auto& g : inv.gpus) {
    if (g.vendor == Vendor::kAmd) amd.push_back(&g);
  }
  std::string wanted = join(
      [&] {
        std::vector<std::string> v;
        if (req.memory) v.push_back(*req.memory);
        if (req.compute) v.push_back(*req.compute);
        return v;
      }(),
      "+");
  if (amd.empty()) {
    return Error{Code::kUnavailable,
                 "cannot check partition modes: no AMD GPU detected (required: " + wanted + ")",
                 "partition modes (NPSx, SPX/CPX) exist on AMD Instinct MI300-class GPUs; run "
                 "`gpulab detect` to see what this host has"};
  }
  std::set<std::string> current;
  std::vector<std::string> per_gpu;
  bool ok = true;
  for (const GpuInfo* g : amd) {
    bool mem_ok = !req.memory || g->memory_partition == req.memory;
    bool cmp_ok = !req.compute || g->compute_partition == req.compute;
    ok = ok && mem_ok && cmp_ok;
    current.insert(mode_pair(*g));
    per_gpu.push_back("GPU" + std::to_string(g->index) + ": " + mode_pair(*g));
  }
  if (ok) return ok_status();
  // One line as the seed prints it when all GPUs agree, the per-GPU list when they do not.
  std::string cur = current.size() == 1 ? *current.begin() : join(per_gpu, "; ");
  std::vector<std::string> fix;
  std::vector<std::string> rocm;
  if (req.memory) {
    fix.push_back("sudo amd-smi set --memory-partition " + *req.memory);
    rocm.push_back("--setmemorypartition " + *req.memory);
  }
  if (req.compute) {
    fix.push_back("sudo amd-smi set --compute-partition " + *req.compute);
    rocm.push_back("--setcomputepartition " + *req.compute);
  }
  std::string hint = "reconfigure the GPUs to " + wanted + " mode: " + join(fix, " && ") +
                     " (older ROCm: sudo rocm-smi " + join(rocm, " ") +
                     "); a memory partition change takes effect after the amdgpu driver reloads";
  return Error{Code::kUnsupported,
               "Detected unsupported configuration\nCurrent configuration: " + cur, hint};
}

void require_partition(std::string_view list, const DetectOptions& opts) {
  PartitionRequirement req = parse_partition_requirement(list).value_or_throw();
  DetectOptions o = opts;
  o.host_checks = false;
  o.processes = false;
  Inventory inv = detect(o);
  Status st = check_partition(inv, req);
  if (!st) throw Exception(st.error());
}

}  // namespace gpulab::gpu
