// The engine container of a booked row: its spec (image, env, limits, user ports, exactly its
// GPUs, the SSH port, the labels that tie it to this book and to its row), created and started.
// Shared by create, recreate, move and the reconciler's completion of a cut-off recreate.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "service/ops/service.h"

namespace gpulab::service {

// The engine's container for a row: the spec's image, env, limits and ports, exactly `gpus`, the
// SSH port, and the labels that tie it to this book and to the row `intent`.
LabContainer engine_spec(Service& s, const std::string& name, const std::string& owner,
                         const ContainerSpec& spec, const std::vector<GpuSlot>& gpus, int ssh_port,
                         std::int64_t intent);

// Creates and starts `cs` on `host`; on failure the engine removes what it made (the error says
// which host, and what to install where the engine lacks the NVIDIA runtime). Without a new
// `password` the container keeps the one its layer has (recreate, restart after a crash).
std::string engine_create_start(Service& s, const std::string& host, const LabContainer& cs,
                                const std::string& password = {});

// Creates and starts the engine container for a row as booked (its GPUs and ports); used when a
// recreate makes it again and when a restart finds a recreate that was cut off. No new password.
std::string create_engine_container(Service& s, const ContainerRecord& c);

}  // namespace gpulab::service
