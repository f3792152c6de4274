// Flat padded parameter buffers of sharded data parallel: a group of parameters laid end to end
// (each in its own memory order) in one buffer padded to a multiple of the world size, so that it
// splits into equal shards. The parameters' storage *is* that buffer (FSDP's flat parameter), so
// freeing it frees them all at once and an all-gather into it restores them without a copy.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "train/dist/buffer_pool.h"

namespace gpulab::train::dist {

class FlatGroup {
 public:
  // Moves `params` (dense, same dtype and device) into one flat buffer and takes this rank's
  // shard of it as the master copy, in the parameters' dtype. The buffer (what the parameters
  // become, and what the all-gather fills) is in `compute` (mixed precision: bf16 compute copies
  // of fp32 masters); undefined keeps the parameters' dtype. The parameters stay gathered.
  FlatGroup(std::vector<torch::Tensor> params, int rank, int world,
            std::optional<torch::ScalarType> compute = std::nullopt);

  const std::vector<torch::Tensor>& params() const { return params_; }
  int64_t numel() const { return numel_; }          // real elements
  int64_t padded_numel() const { return padded_; }  // numel rounded up to world * shard
  int64_t shard_numel() const { return shard_; }
  int64_t offset_of(size_t i) const { return offsets_[i]; }
  int rank() const { return rank_; }
  int world() const { return world_; }

  // This rank's slice of the flat buffer: what the optimizer steps (its grad() is the reduced
  // gradient shard). Elements past numel() (padding) stay zero.
  torch::Tensor& shard() { return shard_tensor_; }
  const torch::Tensor& shard() const { return shard_tensor_; }
  // The full flat buffer (its storage is every parameter's storage); empty while released.
  torch::Tensor& full() { return full_; }
  bool gathered() const { return gathered_; }
  // Whether the buffer holds memory (gathered, or being gathered into).
  bool allocated() const { return full_.storage().nbytes() > 0; }

  // Gives the buffer's memory back (to `pool` when given, else freed); the parameters keep their
  // shapes but no data.
  void release(BufferPool* pool = nullptr);
  // Gives the buffer (uninitialised) memory of the full size, a kept one from `pool` when it has
  // one; fill it (all-gather) next.
  void allocate(BufferPool* pool = nullptr);
  void mark_gathered() { gathered_ = true; }
  // The values are stale (the shards moved on) but the memory stays, to be all-gathered over.
  void mark_stale() { gathered_ = false; }

  // The flat gradient in `dtype`: each parameter's .grad (zeros where none) at its offset.
  torch::Tensor flat_grad(torch::ScalarType dtype) const;
  torch::ScalarType master_dtype() const { return shard_tensor_.scalar_type(); }
  torch::ScalarType compute_dtype() const { return full_.scalar_type(); }
  // The parameters' logical values, gathered or not: `full` laid out as in this group.
  torch::Tensor param_view(const torch::Tensor& full, size_t i) const;
  // The parameters in the master dtype, gathered from every rank's shard (an all-gather the
  // caller ran into `full_master`, padded_numel() elements): they stop sharing the flat buffer.
  void adopt_master(const torch::Tensor& full_master);
  // Bytes the gathered buffer and the shard take.
  int64_t full_bytes() const;
  int64_t shard_bytes() const;

 private:
  std::vector<torch::Tensor> params_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0;
  int64_t padded_ = 0;
  int64_t shard_ = 0;
  int rank_ = 0;
  int world_ = 1;
  torch::Tensor full_;
  torch::Tensor shard_tensor_;
  bool gathered_ = true;
};

}  // namespace gpulab::train::dist
