// GradReducer: bucket layout, accumulator hooks, in-order launches, and the end-of-backward wait.
#include "train/dist/grad_reducer.h"

#include "core/error.h"
#include "train/dist/grad_hooks.h"

namespace gpulab::train::dist {

std::shared_ptr<GradReducer> GradReducer::create(std::shared_ptr<Communicator> comm,
                                                 std::vector<torch::Tensor> params,
                                                 ReducerOptions opts) {
  std::shared_ptr<GradReducer> r(new GradReducer(std::move(comm), std::move(params), opts));
  r->install_hooks();
  return r;
}

GradReducer::GradReducer(std::shared_ptr<Communicator> comm, std::vector<torch::Tensor> params,
                         ReducerOptions opts)
    : comm_(std::move(comm)), opts_(std::move(opts)) {
  for (auto& p : params)
    if (p.requires_grad()) params_.push_back(p);
  if (opts_.compression == "fp16") {
    compress_ = true;
    wire_dtype_ = torch::kHalf;
  } else if (opts_.compression == "bf16") {
    compress_ = true;
    wire_dtype_ = torch::kBFloat16;
  } else if (opts_.compression != "none") {
    throw Exception(Code::kInvalidArgument,
                    "unknown gradient compression '" + opts_.compression + "'",
                    "use none, fp16 or bf16");
  }
  build_buckets();
}

GradReducer::~GradReducer() = default;

// PyTorch DDP's layout: parameters in reverse registration order (roughly the order backward
// produces their gradients), a small first bucket, then buckets up to bucket_cap_mb, one dtype
// and device per bucket.
void GradReducer::build_buckets() {
  const auto cap = [&](size_t bucket) {
    double mb =
        bucket == 0 ? std::min(opts_.first_bucket_mb, opts_.bucket_cap_mb) : opts_.bucket_cap_mb;
    return static_cast<int64_t>(mb * 1024 * 1024);
  };
  std::vector<std::vector<size_t>> groups;
  int64_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    const auto& p = params_[k];
    const int64_t nbytes = p.numel() * static_cast<int64_t>(p.element_size());
    bool fits = !groups.empty() && bytes + nbytes <= cap(groups.size() - 1);
    if (fits) {
      const auto& first = params_[groups.back().front()];
      fits = first.scalar_type() == p.scalar_type() && first.device() == p.device();
    }
    if (!fits) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(k);
    bytes += nbytes;
  }
  bucket_of_.assign(params_.size(), 0);
  views_.assign(params_.size(), torch::Tensor());
  param_ready_.assign(params_.size(), false);
  stats_ = {};
  for (size_t b = 0; b < groups.size(); ++b) {
    Bucket bucket;
    int64_t total = 0;
    for (size_t k : groups[b]) {
      bucket.offsets.push_back(total);
      total += params_[k].numel();
    }
    const auto& first = params_[groups[b].front()];
    bucket.buffer = torch::zeros({total}, first.options().requires_grad(false));
    bucket.params = groups[b];
    for (size_t i = 0; i < groups[b].size(); ++i) {
      size_t k = groups[b][i];
      bucket_of_[k] = b;
      // The view takes the parameter's strides (channels-last weights stay channels-last), so
      // autograd accumulates straight into it: the gradient layout contract DDP keeps too.
      const auto& p = params_[k];
      auto flat = bucket.buffer.narrow(0, bucket.offsets[i], p.numel());
      views_[k] = p.is_non_overlapping_and_dense() ? flat.as_strided(p.sizes(), p.strides())
                                                   : flat.view(p.sizes());
    }
    stats_.bytes += total * static_cast<int64_t>(compress_ ? 2 : first.element_size());
    buckets_.push_back(std::move(bucket));
    bucket_params_.push_back(groups[b]);
  }
  stats_.buckets = static_cast<int>(buckets_.size());
}

void GradReducer::install_hooks() {
  std::weak_ptr<GradReducer> self = weak_from_this();
  accumulators_ = on_each_grad_ready(params_, [self](size_t k) {
    if (auto r = self.lock()) r->on_grad_ready(k);
  });
}

// Makes the parameter's .grad the bucket view (the trainer sets gradients to none after each
// step, and autograd may have stolen a fresh tensor); keeps the values.
void GradReducer::ensure_view(size_t k) {
  auto& p = params_[k];
  torch::Tensor g = p.grad();
  const auto& view = views_[k];
  if (g.defined() && g.data_ptr() == view.data_ptr()) return;
  torch::NoGradGuard no_grad;
  if (g.defined()) {
    view.copy_(g);
  } else {
    view.zero_();
  }
  p.mutable_grad() = view;
}

void GradReducer::prepare(bool sync) {
  std::lock_guard<std::mutex> lock(mu_);
  sync_ = sync;
  for (size_t k = 0; k < params_.size(); ++k) ensure_view(k);
}

void GradReducer::on_grad_ready(size_t k) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sync_ || param_ready_[k]) return;
  if (!callback_queued_) {
    // Runs once the whole backward pass is done, on the thread that ran it.
    std::weak_ptr<GradReducer> self = weak_from_this();
    at_backward_end([self] {
      if (auto r = self.lock()) r->finalize();
    });
    callback_queued_ = true;
    reduced_ = false;
  }
  ensure_view(k);
  param_ready_[k] = true;
  ++buckets_[bucket_of_[k]].ready;
  launch_ready_locked(true);
}

// Buckets start strictly in index order, so every rank issues the same collectives in the
// same order even when backward finishes its parameters in a different order.
void GradReducer::launch_ready_locked(bool in_backward) {
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].ready == buckets_[next_launch_].params.size()) {
    launch_locked(next_launch_++, in_backward);
  }
}

void GradReducer::launch_locked(size_t b, bool in_backward) {
  Bucket& bucket = buckets_[b];
  torch::NoGradGuard no_grad;
  // Divide first: the sum of the shares is the mean, and half precision cannot overflow.
  bucket.buffer.div_(comm_->size());
  bucket.wire = compress_ ? bucket.buffer.to(wire_dtype_) : bucket.buffer;
  bucket.work = comm_->allreduce_async(bucket.wire, bucket_name(b));
  bucket.launched_in_backward = in_backward;
}

std::string GradReducer::bucket_name(size_t b) const {
  return "allreduce of gradient bucket " + std::to_string(b + 1) + " of " +
         std::to_string(buckets_.size());
}

void GradReducer::finalize() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sync_ || reduced_) return;
  // Parameters that took no part in this backward pass still join their bucket (with the zero
  // or accumulated gradient they hold), as other ranks may have used them.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (param_ready_[k]) continue;
    ensure_view(k);
    param_ready_[k] = true;
    ++buckets_[bucket_of_[k]].ready;
  }
  launch_ready_locked(false);
  GPULAB_ASSERT(next_launch_ == buckets_.size(), "a gradient bucket was never launched");
  stats_.launched_during_backward = 0;
  torch::NoGradGuard no_grad;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    comm_->wait(bucket.work, bucket_name(b));
    if (compress_) bucket.buffer.copy_(bucket.wire);
    bucket.work.reset();
    bucket.wire = torch::Tensor();
    bucket.ready = 0;
    if (bucket.launched_in_backward) ++stats_.launched_during_backward;
  }
  std::fill(param_ready_.begin(), param_ready_.end(), false);
  next_launch_ = 0;
  callback_queued_ = false;
  reduced_ = true;
}

void GradReducer::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!sync_) return;
  }
  finalize();  // no-op when the end-of-backward callback already ran
  std::lock_guard<std::mutex> lock(mu_);
  reduced_ = false;  // the next step starts afresh
}

}  // namespace gpulab::train::dist
