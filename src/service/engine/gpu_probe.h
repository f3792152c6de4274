// Finding a host's GPUs through its own engine, the parts no engine owns: the script a probe
// container runs (it copies the kernel files gpulab's detection reads into a tree), and that
// tree, handed back as a tar from an untrusted host, checked, unpacked and detected.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/result.h"
#include "service/engine/inventory.h"

namespace gpulab::service {

// Where the probe script leaves its tree inside the container (host paths without the /host of
// the read-only bind: tree/sys/..., tree/proc/..., tree/commands/ for tool output).
inline constexpr const char* kProbeOutDir = "/gpulab-probe";
inline constexpr const char* kProbeTreeDir = "/gpulab-probe/tree";
// Where the host's probe root is bound (read-only) inside the container.
inline constexpr const char* kProbeHostMount = "/host";
// What the script prints last on success (anything else: it did not finish).
inline constexpr const char* kProbeDoneLine = "gpulab-probe: done";

// The shell script (busybox sh is enough: sh, cat, mkdir, rm) the probe container runs.
const std::string& gpu_probe_script();

// Bounds on a probe's answer: a few kernel files and an nvidia-smi XML are far below them.
struct ProbeTreeLimits {
  std::int64_t max_archive_bytes = 32 << 20;
  std::int64_t max_file_bytes = 8 << 20;
  int max_entries = 20000;
  int max_depth = 24;
};

// Unpacks a probe's tar into the empty folder `dest`: only plain files and folders with
// relative names, under one top folder (Docker's archive names the folder it was asked for),
// which is dropped. Anything else (links, devices, "..", absolute names, a second top folder,
// more than the limits) refuses the whole archive: kDataError saying what.
Status unpack_probe_tree(std::string_view tar, const std::filesystem::path& dest,
                         const ProbeTreeLimits& limits = {});

// The GPUs in a probe's tar: unpacked into a private temporary folder (removed afterwards) and
// read by gpu::detect as a captured tree; each GPU carries `host`. kDataError for a damaged or
// hostile archive; an archive with no GPU in it is an empty inventory with the reason in note.
Result<ServiceInventory> inventory_from_probe(std::string_view tar, const std::string& host,
                                              const ProbeTreeLimits& limits = {});

}  // namespace gpulab::service
