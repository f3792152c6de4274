// Bucketed gradient all-reduce that overlaps with the backward pass, built on public autograd
// pieces (Debian's libtorch cannot compile c10d::Reducer): a post hook on each parameter's
// gradient accumulator marks it ready; a full bucket starts its asynchronous all-reduce at once;
// a callback queued on the autograd engine waits for all buckets when backward ends. Gradients
// live as views into the flat bucket buffers, so reducing a bucket reduces them in place.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "train/dist/communicator.h"

namespace gpulab::train::dist {

struct ReducerOptions {
  double first_bucket_mb = 1.0;  // small, so communication starts early in the backward pass
  double bucket_cap_mb = 25.0;
  std::string compression = "none";  // none | fp16 | bf16: the wire format of the all-reduce
};

// What the last synchronised backward pass did (for tests and the bench).
struct ReducerStats {
  int buckets = 0;
  int launched_during_backward = 0;  // buckets whose all-reduce started before backward ended
  int64_t bytes = 0;                 // payload all-reduced per step
};

class GradReducer : public std::enable_shared_from_this<GradReducer> {
 public:
  // `params`: the model's parameters in registration order (those not requiring grad are
  // skipped). Installs the hooks; they stay inert once the reducer is destroyed.
  static std::shared_ptr<GradReducer> create(std::shared_ptr<Communicator> comm,
                                             std::vector<torch::Tensor> params,
                                             ReducerOptions opts);
  ~GradReducer();

  // Before each forward/backward. sync = false skips communication (gradient accumulation).
  // Gradients that were reset (set to none) become zeroed views into their buckets again.
  void prepare(bool sync);
  // After a synchronised backward: gradients hold the mean over ranks when this returns.
  void finish();

  const std::vector<std::vector<size_t>>& bucket_params() const { return bucket_params_; }
  ReducerStats last_stats() const { return stats_; }

 private:
  GradReducer(std::shared_ptr<Communicator> comm, std::vector<torch::Tensor> params,
              ReducerOptions opts);
  struct Bucket {
    torch::Tensor buffer;  // flat, the parameters' dtype
    torch::Tensor wire;    // what goes on the wire (buffer itself, or a half copy)
    std::vector<size_t> params;
    std::vector<int64_t> offsets;
    size_t ready = 0;
    WorkPtr work;
    bool launched_in_backward = false;
  };
  void build_buckets();
  void install_hooks();
  void on_grad_ready(size_t index);
  void ensure_view(size_t index);
  void launch_ready_locked(bool in_backward);
  void launch_locked(size_t bucket, bool in_backward);
  void finalize();
  std::string bucket_name(size_t b) const;

  std::shared_ptr<Communicator> comm_;
  std::vector<torch::Tensor> params_;
  ReducerOptions opts_;
  torch::ScalarType wire_dtype_ = torch::kFloat;
  bool compress_ = false;

  std::vector<Bucket> buckets_;
  std::vector<std::vector<size_t>> bucket_params_;
  std::vector<size_t> bucket_of_;                 // parameter -> bucket
  std::vector<torch::Tensor> views_;              // parameter -> its view into the bucket
  std::vector<GradAccumulatorPtr> accumulators_;  // keeps the hooks alive

  std::mutex mu_;
  bool sync_ = true;
  bool callback_queued_ = false;
  bool reduced_ = false;  // this step's buckets are reduced (set by finalize)
  std::vector<bool> param_ready_;
  size_t next_launch_ = 0;
  ReducerStats stats_;
};

}  // namespace gpulab::train::dist
