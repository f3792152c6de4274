// ShardContext: DDP's context with the gradient reducer replaced by a ShardedModel.
#include "train/dist/shard_context.h"

#include <fmt/format.h>

#include <cstdio>

#include "train/dist/shard_optimizer.h"
#include "train/dist/sharded_checkpoint.h"
#include "train/dist/sync_batch_norm.h"

namespace gpulab::train::dist {

ShardContext::ShardContext(const launch::RankPlace& place, const ShardContextOptions& opts)
    : DdpContext(place, opts.ddp), shard_opts_(opts.shard) {}

ShardContext::ShardContext(std::shared_ptr<Communicator> group, const launch::RankPlace& place,
                           const ShardContextOptions& opts)
    : DdpContext(std::move(group), place, opts.ddp), shard_opts_(opts.shard) {}

ShardContext::~ShardContext() = default;

void ShardContext::prepare_model(torch::nn::Module& model) {
  share_rank0_model(model);
  keep_buffers_in_sync(model);
  sharded_ = ShardedModel::create(comm_, model, shard_opts_);
}

void ShardContext::before_backward(torch::nn::Module& model, bool sync) {
  DdpContext::before_backward(model, sync);
  sharded_->prepare(sync);
}

void ShardContext::after_backward(torch::nn::Module& /*model*/) {
  sharded_->finish();
}

std::vector<std::vector<torch::Tensor>> ShardContext::optimizer_groups() {
  return {sharded_->decay_shards(), sharded_->no_decay_shards()};
}

double ShardContext::clip_grad_norm(torch::nn::Module& /*model*/, double max_norm) {
  return clip_shard_grad_norm(*comm_, sharded_->all_shards(), max_norm);
}

void ShardContext::after_step(torch::nn::Module& /*model*/, const torch::optim::Optimizer& opt) {
  if (steps_done_ == 0) check_memory(opt);
  if (steps_done_ == 1) check_peak(opt);
  sharded_->after_step();
  if (steps_done_ == 0) sharded_->start_peak();  // step 2: the optimizer state exists by then
  ++steps_done_;
}

bool ShardContext::overflow_anywhere(bool mine) {
  return comm_->any_rank(mine, "whether any rank's gradient shard overflowed");
}

PlanQuery ShardContext::plan_query(const torch::optim::Optimizer& opt) const {
  PlanQuery q;
  q.stage = sharded_->stage();
  q.world = comm_->size();  // the sharding group (the data-parallel ranks of a TP mesh)
  q.optimizer_states = optimizer_state_tensors(opt);
  if (shard_opts_.param_dtype) q.compute_bytes = c10::elementSize(*shard_opts_.param_dtype);
  if (shard_opts_.reduce_dtype) q.reduce_bytes = c10::elementSize(*shard_opts_.reduce_dtype);
  q.pairwise_reduce = !comm_->has_reduce_scatter();
  return q;
}

namespace {

// "HEAD, planned / measured: params P / M, grads P / M[, optimizer P / M], total P / M (+x %)"
void print_planned_measured(const std::string& head, const int64_t* planned,
                            const int64_t* measured, size_t parts) {
  static const char* const names[] = {"params", "grads", "optimizer"};
  std::string line = head + ", planned / measured:";
  int64_t pt = 0, mt = 0;
  for (size_t i = 0; i < parts; ++i) {
    line +=
        fmt::format(" {} {} / {},", names[i], human_bytes(planned[i]), human_bytes(measured[i]));
    pt += planned[i];
    mt += measured[i];
  }
  std::printf("%s total %s / %s (%+.1f %%)\n", line.c_str(), human_bytes(pt).c_str(),
              human_bytes(mt).c_str(),
              100.0 * static_cast<double>(pt - mt) / static_cast<double>(std::max<int64_t>(1, mt)));
  std::fflush(stdout);
}

}  // namespace

// Once, after step 2: the planner's step peak of parameters and gradients against the highest
// tensor accounting the ShardedModel saw during that step (it samples whenever they grow).
void ShardContext::check_peak(const torch::optim::Optimizer& opt) {
  const auto m = sharded_->stop_peak();
  const auto plan = plan_peak(footprint_of(*sharded_), plan_query(opt));
  auto& c = memory_check_;
  c.peak_planned[0] = plan.params;
  c.peak_planned[1] = plan.grads;
  c.peak_measured[0] = m.params_full + m.params_shard;
  c.peak_measured[1] = m.grads_full + m.grads_flat + m.grads_shard;
  if (is_main())
    print_planned_measured(
        fmt::format("Peak per rank in step 2 (--shard {})", shard_stage_name(sharded_->stage())),
        c.peak_planned, c.peak_measured, 2);
}

// Once, after the first step (gradient shards still held): the planner's figures for this rank
// against the bytes of the tensors it holds; rank 0 prints both.
void ShardContext::check_memory(const torch::optim::Optimizer& opt) {
  const PlanQuery q = plan_query(opt);
  auto plan = plan_after_step(footprint_of(*sharded_), q);
  auto m = sharded_->memory();
  auto& c = memory_check_;
  c.planned[0] = plan.params;
  c.planned[1] = plan.grads;
  c.planned[2] = plan.optimizer;
  c.measured[0] = m.params_full + m.params_shard;
  c.measured[1] = m.grads_full + m.grads_shard;
  c.measured[2] = optimizer_state_bytes(opt);
  if (is_main())
    print_planned_measured(fmt::format("Memory per rank after step 1 (--shard {}, {} ranks)",
                                       shard_stage_name(q.stage), q.world),
                           c.planned, c.measured, 3);
}

void ShardContext::gather_parameters(torch::nn::Module& /*model*/) {
  sharded_->gather_master();
}

bool ShardContext::save_checkpoint(const fs::path& dir, const TrainState& state,
                                   torch::nn::Module& model, const torch::optim::Optimizer& opt,
                                   int keep) {
  save_sharded_checkpoint(dir, state, model, *sharded_, opt, keep);
  return true;
}

std::optional<Result<TrainState>> ShardContext::load_checkpoint(const CheckpointInfo& ckpt,
                                                                torch::nn::Module& model,
                                                                torch::optim::Optimizer& opt) {
  if (!is_sharded_checkpoint(ckpt))
    return Result<TrainState>(Error{
        Code::kInvalidArgument,
        "checkpoint " + ckpt.manifest.string() +
            " was not written by a --shard run (a one-process, DDP, --tp or --pp run wrote it)",
        "resume it with --shard none (and the --tp/--pp it was written with, or none), or start "
        "afresh"});
  return load_sharded_checkpoint(ckpt, model, *sharded_, opt);
}

std::string ShardContext::backend() const {
  return comm_->backend() + ", shard " + shard_stage_name(shard_opts_.stage);
}

}  // namespace gpulab::train::dist
