// The tensor-parallel layers: shapes, initialisation and the forward through the regions.
#include "train/parallel/tp_layers.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "train/ops/onednn_linear.h"
#include "train/parallel/tp_regions.h"

namespace gpulab::train::parallel {

namespace {

// A width the group cannot split evenly is a layout error the caller must change.
int64_t split_size(int64_t n, TpGroup& g, const char* what) {
  if (n % g.size() != 0)
    throw Exception(Code::kInvalidArgument,
                    std::string(what) + " " + std::to_string(n) +
                        " is not divisible by the tensor-parallel size " + std::to_string(g.size()),
                    "use a --tp that divides it");
  return n / g.size();
}

// nn::Linear's default (uniform in +-1/sqrt(fan_in) of the full layer): a slice of it has the
// distribution of the same slice of an unsplit layer.
torch::Tensor uniform(std::vector<int64_t> shape, int64_t fan_in, const torch::TensorOptions& o) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return torch::empty(shape, o).uniform_(-bound, bound);
}

}  // namespace

int64_t padded_to(int64_t n, int64_t parts) {
  return (n + parts - 1) / parts * parts;
}

torch::Tensor shard_of(const torch::Tensor& full, int64_t dim, int rank, int parts) {
  GPULAB_ASSERT(full.size(dim) % parts == 0, "shard_of: dimension not divisible");
  const int64_t n = full.size(dim) / parts;
  return full.narrow(dim, rank * n, n).clone();
}

std::vector<torch::Tensor> all_shards_of(const torch::Tensor& mine, TpGroup& group,
                                         const char* what) {
  // [1, n] gathered along its last dimension is every rank's n elements in rank order.
  auto per = group.gather_last_dim(mine.contiguous().view({1, -1}), what).view({group.size(), -1});
  std::vector<torch::Tensor> out;
  for (int r = 0; r < group.size(); ++r) out.push_back(per[r].view(mine.sizes()));
  return out;
}

ColumnParallelLinearImpl::ColumnParallelLinearImpl(TpGroup& g, int64_t in, int64_t out,
                                                   bool with_bias, bool gather,
                                                   const torch::TensorOptions& o)
    : group(&g), gather_output(gather) {
  const int64_t local = split_size(out, g, "the output width");
  weight = register_parameter("weight", uniform({local, in}, in, o));
  if (with_bias) bias = register_parameter("bias", uniform({local}, in, o));
}

torch::Tensor ColumnParallelLinearImpl::forward(const torch::Tensor& x) {
  auto y = forward_in_region(copy_to_tp(x, *group));
  return gather_output ? gather_from_tp(y, *group) : y;
}

torch::Tensor ColumnParallelLinearImpl::forward_in_region(const torch::Tensor& x_copied) {
  return dense_linear(x_copied, weight, bias);
}

RowParallelLinearImpl::RowParallelLinearImpl(TpGroup& g, int64_t in, int64_t out, bool with_bias,
                                             bool parallel_in, const torch::TensorOptions& o)
    : group(&g), input_is_parallel(parallel_in) {
  const int64_t local = split_size(in, g, "the input width");
  weight = register_parameter("weight", uniform({out, local}, in, o));
  if (with_bias) bias = register_parameter("bias", uniform({out}, in, o));
}

torch::Tensor RowParallelLinearImpl::forward(const torch::Tensor& x) {
  auto part = input_is_parallel ? x : scatter_to_tp(x, *group);
  auto y = reduce_from_tp(forward_partial(part), *group);
  return bias.defined() ? y + bias : y;
}

torch::Tensor RowParallelLinearImpl::forward_partial(const torch::Tensor& x_split) {
  return dense_linear(x_split, weight);
}

VocabParallelEmbeddingImpl::VocabParallelEmbeddingImpl(TpGroup& g, int64_t vocab_size, int64_t dim,
                                                       const torch::TensorOptions& o)
    : group(&g), vocab(vocab_size) {
  const int64_t local = padded_to(vocab_size, g.size()) / g.size();
  weight = register_parameter("weight", torch::randn({local, dim}, o));
}

torch::Tensor VocabParallelEmbeddingImpl::forward(const torch::Tensor& ids) {
  return reduce_from_tp(forward_partial(ids), *group);
}

torch::Tensor VocabParallelEmbeddingImpl::forward_partial(const torch::Tensor& ids) {
  if (ids.numel() > 0 && (ids.min().item<int64_t>() < 0 || ids.max().item<int64_t>() >= vocab))
    throw Exception(Code::kInvalidArgument,
                    "a token id is outside the vocabulary of " + std::to_string(vocab),
                    "check that the tokenizer matches the model");
  const int64_t start = vocab_start();
  const int64_t rows = weight.size(0);
  auto outside = (ids < start) | (ids >= start + rows);
  auto local = (ids - start).masked_fill(outside, 0);
  return torch::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);
}

}  // namespace gpulab::train::parallel
