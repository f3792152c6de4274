// TpGroup: the TP layers' collectives and their byte count.
#include "train/parallel/tp_group.h"

namespace gpulab::train::parallel {

void TpGroup::allreduce_sum(torch::Tensor& t, const char* what) {
  if (size() == 1) return;
  bytes_ += t.numel() * static_cast<int64_t>(t.element_size());
  comm_.allreduce_sum(t, what);
}

void TpGroup::allreduce_max(torch::Tensor& t, const char* what) {
  if (size() == 1) return;
  bytes_ += t.numel() * static_cast<int64_t>(t.element_size());
  comm_.allreduce_max(t, what);
}

torch::Tensor TpGroup::gather_last_dim(const torch::Tensor& t, const char* what) {
  if (size() == 1) return t;
  auto in = t.to(comm_.device()).contiguous();
  bytes_ += in.numel() * static_cast<int64_t>(in.element_size());
  auto flat = torch::empty({size() * in.numel()}, in.options());
  auto flat_in = in.view({-1});
  comm_.wait(comm_.allgather_async(flat, flat_in, what), what);
  // [size, ..., d] -> [..., size, d] -> [..., size * d]
  auto shape = in.sizes().vec();
  std::vector<int64_t> stacked{size()};
  stacked.insert(stacked.end(), shape.begin(), shape.end());
  auto out = flat.view(stacked).movedim(0, -2);
  shape.back() *= size();
  return out.reshape(shape).to(t.device());
}

}  // namespace gpulab::train::parallel
