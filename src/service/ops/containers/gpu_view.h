// The lab's GPUs as every answer shows them (status, gpus, /metrics, the dashboard, and a
// create's "N free"), from one place so they agree at every moment: each GPU with its
// host-qualified id ("lab1:0"), its holder, and whether it is offered. A GPU is offered while its
// host is up and answering; a down or unresponsive host's free GPUs are not offered (no create
// can get them until it is back) and its held ones stay held.
#pragma once

#include <string>
#include <vector>

#include "service/ops/service.h"

namespace gpulab::service {

struct GpuEntry {
  GpuSlot slot;
  std::string id;        // "<host>:<index>": an index alone repeats on every host
  std::string holder;    // the container or lease holding it; empty when free
  bool offered = false;  // its host is up and answering
  bool available() const { return holder.empty() && offered; }
};

// "<host>:<index>".
std::string gpu_id(const GpuSlot& g);
// Every host's GPUs in host order, with their holders from the book.
std::vector<GpuEntry> gpu_entries(const Service& s);

}  // namespace gpulab::service
