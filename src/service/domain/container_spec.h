// What a user asked a container to be, typed: CPU and memory limits parsed once at the API edge
// into the engine's units (nano-CPUs, bytes) and kept beside the text the user wrote, ports parsed
// into mappings. Stored with the container's row, in snapshots and in backup manifests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "service/domain/port_mapping.h"

namespace gpulab::service {

// A CPU limit: "2", "0.5" as given (shown back unchanged, as the seed did) and in nano-CPUs.
struct CpuLimit {
  std::string text;  // empty: no limit
  std::int64_t nano_cpus = 0;
  bool set() const { return !text.empty(); }
  double cpus() const { return static_cast<double>(nano_cpus) / 1e9; }
};

// A size limit: "8g", "512m" as given and in bytes.
struct SizeLimit {
  std::string text;  // empty: no limit
  std::int64_t bytes = 0;
  bool set() const { return !text.empty(); }
};

// The user-settable fields of a container, kept so a snapshot, backup or GPU change can recreate
// it. Built only by apply_spec_fields (a request) and from_json (a stored or uploaded record),
// which check every value: code holding a ContainerSpec never parses its limits again.
struct ContainerSpec {
  std::string image;  // what the engine runs
  // The image the user created it from, once the service runs it from an image of its own (a
  // recreate, a move, a restored backup); empty while `image` is that one. Lists show it.
  std::string origin_image;
  int gpu_count = 0;
  CpuLimit cpus;
  SizeLimit memory;
  SizeLimit shm_size;  // /dev/shm
  std::int64_t pids_limit = 0;
  std::vector<PortMapping> ports;
  std::string ssh_public_key;
  std::vector<std::string> env;  // "KEY=value", user-provided (no GPULAB_ names)

  // The stored form keeps the limits as the user wrote them ("cpus": "2"), as it always has.
  Json to_json() const;
  // Checks the limits as a request's would be (INVALID_REQUEST): an uploaded backup is user input.
  static ContainerSpec from_json(const Json& j);
  // Runs it from `internal` (an image the service made of it), keeping what it came from.
  void run_from(const std::string& internal);
  // The image a user knows it by: its origin, or the one it runs.
  const std::string& shown_image() const { return origin_image.empty() ? image : origin_image; }
};

// Applies request fields (gpu_count, port, cpus, memory, shm_size, pids_limit, ssh_public_key,
// env) onto `base`, checking and parsing each value once. INVALID_REQUEST names the field.
ContainerSpec apply_spec_fields(const Json& req, ContainerSpec base);

}  // namespace gpulab::service
