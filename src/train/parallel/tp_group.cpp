// TpGroup: the TP layers' collectives and their byte count.
#include "train/parallel/tp_group.h"

#include "core/error.h"

namespace gpulab::train::parallel {

namespace {

int64_t nbytes(const torch::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

}  // namespace

void TpGroup::count_allreduce(const torch::Tensor& t) {
  bytes_ += nbytes(t);
  ring_bytes_ += 2 * nbytes(t) * (size() - 1) / size();
}

void TpGroup::allreduce_sum(torch::Tensor& t, const char* what) {
  if (size() == 1) return;
  count_allreduce(t);
  comm_.allreduce_sum(t, what);
}

void TpGroup::allreduce_max(torch::Tensor& t, const char* what) {
  if (size() == 1) return;
  count_allreduce(t);
  comm_.allreduce_max(t, what);
}

torch::Tensor TpGroup::gather_dim(const torch::Tensor& t, int64_t dim, const char* what) {
  if (size() == 1) return t;
  const int64_t d = dim < 0 ? dim + t.dim() : dim;
  // The gathered dimension first: rank order along it is the all-gather's flat
  // order.
  auto in = t.to(comm_.device()).movedim(d, 0).contiguous();
  bytes_ += nbytes(in);
  ring_bytes_ += nbytes(in) * (size() - 1);
  auto flat = torch::empty({size() * in.numel()}, in.options());
  auto flat_in = in.view({-1});
  comm_.wait(comm_.allgather_async(flat, flat_in, what), what);
  auto shape = in.sizes().vec();
  shape[0] *= size();
  return flat.view(shape).movedim(0, d).contiguous().to(t.device());
}

torch::Tensor TpGroup::reduce_scatter_dim(const torch::Tensor& t, int64_t dim, const char* what) {
  if (size() == 1) return t;
  const int64_t d = dim < 0 ? dim + t.dim() : dim;
  GPULAB_ASSERT(t.size(d) % size() == 0, "reduce_scatter_dim: dimension not divisible");
  auto in = t.to(comm_.device()).movedim(d, 0).contiguous();
  bytes_ += nbytes(in);
  ring_bytes_ += nbytes(in) * (size() - 1) / size();
  const int64_t part = in.size(0) / size();
  torch::Tensor mine;
  if (comm_.has_reduce_scatter()) {
    mine = torch::empty_like(in.narrow(0, 0, part));
    comm_.wait(comm_.reduce_scatter_async(mine, in, what), what);
  } else {
    comm_.allreduce_sum(in, what);
    mine = in.narrow(0, rank() * part, part);
  }
  return mine.movedim(0, d).contiguous().to(t.device());
}

}  // namespace gpulab::train::parallel
