// A container row's views: its GPUs' indices and UUIDs.
#include "service/domain/records.h"

namespace gpulab::service {

std::vector<int> ContainerRecord::gpu_indices() const {
  std::vector<int> v;
  for (const auto& g : gpus) v.push_back(g.index);
  return v;
}

std::vector<std::string> ContainerRecord::gpu_uuids() const {
  std::vector<std::string> v;
  for (const auto& g : gpus) v.push_back(g.uuid);
  return v;
}

}  // namespace gpulab::service
