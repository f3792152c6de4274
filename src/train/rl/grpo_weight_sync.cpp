// The policy's weights over the process group, and their fingerprint (see grpo_weight_sync.h).
#include "train/rl/grpo_weight_sync.h"

#include <map>
#include <vector>

#include "core/error.h"

namespace gpulab::train::rl {

namespace {

// The sender's dtypes, adopted by a receiver whose parameters differ (a sharded run's bf16
// copies, say): the same bytes then travel and land.
void agree_dtypes(dist::Communicator& group, int root, std::vector<torch::Tensor>& params) {
  auto kinds = torch::empty({static_cast<int64_t>(params.size()) + 1}, torch::kLong);
  auto* k = kinds.data_ptr<int64_t>();
  k[0] = static_cast<int64_t>(params.size());
  for (size_t i = 0; i < params.size(); ++i)
    k[i + 1] = static_cast<int64_t>(params[i].scalar_type());
  group.broadcast(kinds, root, "broadcast of the policy's dtypes");
  if (k[0] != static_cast<int64_t>(params.size()))
    throw Exception(Code::kInternal,
                    "the training rank's policy has " + std::to_string(k[0]) +
                        " parameters and this generation rank's " + std::to_string(params.size()),
                    "both build the model from the same options; report this as a bug");
  for (size_t i = 0; i < params.size(); ++i) {
    const auto dtype = static_cast<torch::ScalarType>(k[i + 1]);
    if (params[i].scalar_type() != dtype) params[i].set_data(params[i].detach().to(dtype));
  }
}

}  // namespace

void broadcast_weights(dist::Communicator& group, int root, torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  auto params = model.parameters();
  agree_dtypes(group, root, params);
  std::map<int, std::vector<torch::Tensor>> by_dtype;
  for (auto& p : params) by_dtype[static_cast<int>(p.scalar_type())].push_back(p);
  for (auto& [dtype, group_params] : by_dtype) {
    std::vector<torch::Tensor> flat;
    for (auto& p : group_params) flat.push_back(p.detach().reshape({-1}));
    auto buffer = torch::cat(flat);
    group.broadcast(buffer, root, "broadcast of the policy's weights");
    int64_t offset = 0;
    for (auto& p : group_params) {
      p.detach().copy_(buffer.narrow(0, offset, p.numel()).view(p.sizes()));
      offset += p.numel();
    }
  }
}

uint64_t weights_hash(torch::nn::Module& model) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto& p : model.parameters()) {
    const auto host = p.detach().cpu().contiguous();
    const auto* bytes = static_cast<const unsigned char*>(host.data_ptr());
    const auto n = static_cast<size_t>(host.numel()) * host.element_size();
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

}  // namespace gpulab::train::rl
