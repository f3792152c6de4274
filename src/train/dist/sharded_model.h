// Sharded data parallel (ZeRO-1/2/3, FSDP's design) over any torch::nn::Module: the wrap policy
// splits the parameters into units; each unit's parameters live in flat padded buffers
// (flat_group.h) of which every rank keeps one shard. Around each unit:
// - full (ZeRO-3): the unit is all-gathered before its forward and before its backward and freed
//   after each (reshard after forward is an option); the next unit's all-gather is started while
//   the current one computes (prefetch);
// - as soon as a unit's backward is done its flat gradient is reduce-scattered into this rank's
//   gradient shard (shard_collectives.h); gradients (ZeRO-2/3) are freed at once;
// - the optimizer steps the shards only; after the step the shards are all-gathered again
//   (ZeRO-1/2 keep full parameters; ZeRO-3 leaves the units freed until they run).
// Accumulation micro-steps (sync = false) communicate nothing: gradients add up locally.
#pragma once

#include <torch/torch.h>

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "train/dist/communicator.h"
#include "train/dist/flat_group.h"
#include "train/dist/shard_collectives.h"
#include "train/dist/wrap_policy.h"
#include "train/unit_hooks.h"

namespace gpulab::train::dist {

enum class ShardStage { kNone = 0, kOptimizer = 1, kGradients = 2, kFull = 3 };

// "none" | "optimizer" | "gradients" | "full"; throws kInvalidArgument otherwise.
ShardStage parse_shard_stage(const std::string& name);
std::string shard_stage_name(ShardStage s);
const std::vector<std::string>& shard_stage_names();

// The parameters (by TensorImpl) that keep the master dtype under mixed precision, as FSDP's
// default does: BatchNorm's, whose kernels take bf16 inputs with fp32 weights and statistics.
std::set<const void*> master_dtype_params(const torch::nn::Module& model);

struct ShardOptions {
  ShardStage stage = ShardStage::kFull;
  std::string wrap = "auto";
  bool reshard_after_forward = true;  // full: free after forward (else keep until backward)
  bool prefetch = true;               // full: start the next unit's all-gather early
  // Mixed precision (FSDP's MixedPrecision): the gathered compute copies' dtype (bf16 under
  // --precision bf16) while the shards stay the master dtype; and the dtype gradients are
  // reduce-scattered in. Unset: the parameters' own dtype.
  std::optional<torch::ScalarType> param_dtype;
  std::optional<torch::ScalarType> reduce_dtype;
};

// Units whose reduce-scatter may run while the backward pass goes on (launch_ready); launching
// one more waits for the oldest, so kReducesInFlight + 1 flat gradients exist for a moment.
inline constexpr size_t kReducesInFlight = 2;

// Bytes held now by this rank (tensor accounting of what sharding manages).
struct ShardMemory {
  int64_t params_full = 0;   // gathered flat buffers
  int64_t params_shard = 0;  // master shards
  int64_t grads_full = 0;    // gradients on the parameters (full size)
  int64_t grads_shard = 0;   // reduced gradient shards
  int64_t grads_flat = 0;    // flat gradients being reduced, and the slices received for them
};

class ShardedModel : public UnitHooks, public std::enable_shared_from_this<ShardedModel> {
 public:
  // Rank 0's values must already be on every rank. Throws kInvalidArgument when the model has
  // fewer trainable elements than ranks (--shard full on a tiny model).
  static std::shared_ptr<ShardedModel> create(std::shared_ptr<Communicator> comm,
                                              torch::nn::Module& model, ShardOptions opts);
  ~ShardedModel() override;

  // UnitHooks: gather / free around a unit's forward; a hook on its output gathers it again
  // before its backward.
  torch::Tensor run(torch::nn::Module& unit,
                    const std::function<torch::Tensor()>& forward) override;

  // Before each forward/backward; sync = false: an accumulation micro-step (no communication).
  void prepare(bool sync);
  // After a synchronised backward: every shard's grad() holds the mean gradient shard.
  void finish();
  // After the optimizer stepped the shards: gradient shards dropped, parameters gathered again
  // (ZeRO-3: only the units that do not free themselves).
  void after_step();
  // Makes every parameter present (export, checkpoints, evaluation of a model that does not
  // call run_unit); ZeRO-3 frees announced units again at their next use.
  void gather_all();
  // For the final weights: the parameters become full copies in the master dtype (with compute
  // copies of another dtype they stop sharing the flat buffers; training does not go on after).
  void gather_master();

  // The optimizer's parameters: this rank's shards, decay groups then no-decay groups.
  std::vector<torch::Tensor> decay_shards() const;
  std::vector<torch::Tensor> no_decay_shards() const;
  std::vector<torch::Tensor> all_shards() const;

  ShardStage stage() const { return opts_.stage; }
  Communicator& comm() { return *comm_; }
  size_t num_units() const { return units_.size(); }
  ShardMemory memory() const;
  // Tensor accounting at its highest while tracking: parameters (gathered units, shards, kept
  // buffers) and gradients (whole ones, flat ones being reduced with their received slices, and
  // shards), sampled whenever one of them grows. start_peak() resets; the trainer tracks step 2
  // (step 1 allocates the optimizer state).
  void start_peak();
  ShardMemory stop_peak();
  // Unit names, parameter names and flat layout (for checkpoints and export).
  struct UnitInfo {
    std::string name;
    std::vector<const FlatGroup*> groups;
    bool frees = false;  // ZeRO-3 frees it between uses (the model runs it via run_unit)
  };
  std::vector<UnitInfo> layout() const;
  std::vector<FlatGroup*> groups();
  // All-gathers started / units freed (tests check one gather per step and that ZeRO-3 frees).
  int64_t gathers() const { return gathers_; }
  int64_t frees() const { return frees_; }

 private:
  struct Unit {
    std::string name;
    torch::nn::Module* module = nullptr;  // nullptr: the root (parameters outside every unit)
    std::vector<std::unique_ptr<FlatGroup>> groups;  // decay then no decay (either may be absent)
    std::vector<bool> decays;                        // per group: takes weight decay
    std::vector<size_t> params;                      // indices into params_
    bool announced = false;                          // the model runs it through run_unit
    bool busy = false;                               // inside its forward or backward
    std::vector<PendingGather> gathering;
    std::vector<PendingReduce> reducing;
    size_t ready = 0;
    bool launched = false;
  };
  ShardedModel(std::shared_ptr<Communicator> comm, ShardOptions opts);
  void build(torch::nn::Module& model);
  void install_hooks();
  void on_grad_ready(size_t param);
  void unit_backward_done(size_t u);
  void launch_ready();
  void launch_reduce(size_t u);
  void finish_reduce(size_t u);
  void finalize();
  void start_gather(size_t u);
  void restart_gather(size_t u);
  void ensure_gathered(size_t u);
  void release(size_t u);
  void prefetch_after(size_t u, int direction);
  void pre_backward(size_t u);
  bool frees_units() const { return opts_.stage == ShardStage::kFull; }
  std::string what(const char* op, size_t u) const;

  std::shared_ptr<Communicator> comm_;
  ShardOptions opts_;
  std::vector<Unit> units_;
  std::vector<torch::Tensor> params_;
  std::vector<size_t> unit_of_;  // param -> unit
  std::vector<bool> param_ready_;
  std::vector<GradAccumulatorPtr> accumulators_;
  std::vector<size_t> order_;  // units in the order the model runs them (learned)
  bool order_known_ = false;   // a backward has ended: order_ holds every unit the model runs
  std::recursive_mutex mu_;
  bool sync_ = true;
  bool callback_queued_ = false;
  bool reduced_ = false;
  size_t next_launch_ = 0;        // counts launches; units launch from the last to the first
  std::deque<size_t> in_flight_;  // units whose reduce-scatter is launched, not yet finished
  int64_t gathers_ = 0;
  int64_t frees_ = 0;
  bool tracking_peak_ = false;
  ShardMemory peak_;
  void sample_peak();
  // Buffers of freed units, handed to the next gathers (ZeRO-3 frees and gathers units of one
  // size in turn); two groups per unit (decay, no decay), two units at a time.
  BufferPool pool_{4};
};

}  // namespace gpulab::train::dist
