// ShardedModel: units and flat groups, the forward/backward hooks that gather and free units,
// gradient reduce-scatter as units finish their backward, and the post-step all-gather.
#include "train/dist/sharded_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "train/dist/grad_hooks.h"
#include "train/dist/sync_batch_norm.h"
#include "train/models/batch_norm.h"
#include "train/optim/optimizers.h"

namespace gpulab::train::dist {

std::set<const void*> master_dtype_params(const torch::nn::Module& model) {
  std::set<const void*> out;
  auto visit = [&](const torch::nn::Module& m) {
    const bool batch_norm = dynamic_cast<const train::BatchNorm2dImpl*>(&m) ||
                            dynamic_cast<const SyncBatchNormImpl*>(&m) ||
                            dynamic_cast<const torch::nn::BatchNorm1dImpl*>(&m) ||
                            dynamic_cast<const torch::nn::BatchNorm2dImpl*>(&m) ||
                            dynamic_cast<const torch::nn::BatchNorm3dImpl*>(&m);
    if (!batch_norm) return;
    for (const auto& p : m.parameters(/*recurse=*/false)) out.insert(p.unsafeGetTensorImpl());
  };
  visit(model);  // (modules() with itself needs a model held by a shared_ptr)
  for (const auto& m : model.modules(/*include_self=*/false)) visit(*m);
  return out;
}

const std::vector<std::string>& shard_stage_names() {
  static const std::vector<std::string> names{"none", "optimizer", "gradients", "full"};
  return names;
}

ShardStage parse_shard_stage(const std::string& name) {
  const auto& n = shard_stage_names();
  for (size_t i = 0; i < n.size(); ++i)
    if (n[i] == name) return static_cast<ShardStage>(i);
  throw Exception(Code::kInvalidArgument, "unknown --shard '" + name + "'",
                  "use none, optimizer (ZeRO-1), gradients (ZeRO-2) or full (ZeRO-3)");
}

std::string shard_stage_name(ShardStage s) {
  return shard_stage_names()[static_cast<size_t>(s)];
}

std::shared_ptr<ShardedModel> ShardedModel::create(std::shared_ptr<Communicator> comm,
                                                   torch::nn::Module& model, ShardOptions opts) {
  std::shared_ptr<ShardedModel> m(new ShardedModel(std::move(comm), std::move(opts)));
  m->build(model);
  m->install_hooks();
  set_unit_hooks(m.get());
  return m;
}

ShardedModel::ShardedModel(std::shared_ptr<Communicator> comm, ShardOptions opts)
    : comm_(std::move(comm)), opts_(std::move(opts)) {}

ShardedModel::~ShardedModel() {
  if (unit_hooks() == this) set_unit_hooks(nullptr);
}

void ShardedModel::build(torch::nn::Module& model) {
  std::map<const void*, size_t> index;
  std::vector<bool> decays;  // the optimizer's rule (optim/optimizers.h)
  const std::set<const void*> master_only =
      opts_.param_dtype ? master_dtype_params(model) : std::set<const void*>();
  for (auto& item : model.named_parameters()) {
    const auto& p = item.value();
    // A pipeline stage shards the pieces it holds (the rest are shapes on the meta device).
    if (!p.requires_grad() || p.is_meta() || index.count(p.unsafeGetTensorImpl())) continue;
    index[p.unsafeGetTensorImpl()] = params_.size();
    params_.push_back(p);
    decays.push_back(takes_weight_decay(model, item.key(), p));
  }
  int64_t total = 0;
  for (auto& p : params_) total += p.numel();
  if (total < comm_->size())
    throw Exception(Code::kInvalidArgument,
                    fmt::format("--shard {}: the model has {} trainable elements, fewer than the "
                                "{} ranks, so some rank would hold no shard",
                                shard_stage_name(opts_.stage), total, comm_->size()),
                    "use fewer ranks, or --shard none");
  // Each parameter belongs to the first unit that holds it; the rest form the root.
  unit_of_.assign(params_.size(), SIZE_MAX);
  struct Draft {
    size_t first;
    std::string name;
    torch::nn::Module* module;
    std::vector<size_t> params;
  };
  std::vector<Draft> drafts;
  for (auto& w : choose_units(model, opts_.wrap)) {
    Draft d{SIZE_MAX, w.name, w.module, {}};
    for (auto& p : w.module->parameters()) {
      auto it = index.find(p.unsafeGetTensorImpl());
      if (it == index.end() || unit_of_[it->second] != SIZE_MAX) continue;
      unit_of_[it->second] = drafts.size();
      d.params.push_back(it->second);
      d.first = std::min(d.first, it->second);
    }
    if (!d.params.empty()) drafts.push_back(std::move(d));
  }
  Draft root{SIZE_MAX, "(root)", nullptr, {}};
  for (size_t k = 0; k < params_.size(); ++k) {
    if (unit_of_[k] != SIZE_MAX) continue;
    root.params.push_back(k);
    root.first = std::min(root.first, k);
  }
  if (!root.params.empty()) drafts.push_back(std::move(root));
  // Units in parameter order: backward finishes them roughly from the last to the first.
  std::sort(drafts.begin(), drafts.end(),
            [](const Draft& a, const Draft& b) { return a.first < b.first; });
  for (size_t u = 0; u < drafts.size(); ++u) {
    Unit unit;
    unit.name = drafts[u].name;
    unit.module = drafts[u].module;
    unit.params = drafts[u].params;
    // Groups by weight decay and, with compute copies, by whether they keep the master dtype.
    std::vector<torch::Tensor> parts[2][2];  // [decays][keeps master dtype]
    for (size_t k : unit.params) {
      unit_of_[k] = u;
      parts[decays[k] ? 1 : 0][master_only.count(params_[k].unsafeGetTensorImpl()) ? 1 : 0]
          .push_back(params_[k]);
    }
    for (int decay : {1, 0})
      for (int master : {0, 1}) {
        auto& group = parts[decay][master];
        if (group.empty()) continue;
        unit.decays.push_back(decay == 1);
        unit.groups.push_back(
            std::make_unique<FlatGroup>(std::move(group), comm_->rank(), comm_->size(),
                                        master ? std::nullopt : opts_.param_dtype));
      }
    units_.push_back(std::move(unit));
  }
  param_ready_.assign(params_.size(), false);
}

void ShardedModel::install_hooks() {
  std::weak_ptr<ShardedModel> self = weak_from_this();
  accumulators_ = on_each_grad_ready(params_, [self](size_t k) {
    if (auto m = self.lock()) m->on_grad_ready(k);
  });
}

std::string ShardedModel::what(const char* op, size_t u) const {
  return fmt::format("{} of unit {} ({})", op, u, units_[u].name);
}

void ShardedModel::start_gather(size_t u) {
  Unit& unit = units_[u];
  if (!unit.gathering.empty() || unit.groups.front()->gathered()) return;
  for (auto& g : unit.groups)
    unit.gathering.push_back(dist::start_gather(*comm_, *g, what("all-gather", u), &pool_));
  ++gathers_;
  sample_peak();
}

void ShardedModel::ensure_gathered(size_t u) {
  Unit& unit = units_[u];
  if (unit.groups.front()->gathered() && unit.gathering.empty()) return;
  start_gather(u);
  for (size_t i = 0; i < unit.groups.size(); ++i)
    finish_gather(*comm_, *unit.groups[i], unit.gathering[i], what("all-gather", u));
  unit.gathering.clear();
}

void ShardedModel::release(size_t u) {
  Unit& unit = units_[u];
  if (!unit.groups.front()->gathered()) return;
  for (auto& g : unit.groups) g->release(&pool_);
  ++frees_;
}

void ShardedModel::prefetch_after(size_t u, int direction) {
  if (!opts_.prefetch) return;
  auto it = std::find(order_.begin(), order_.end(), u);
  if (it == order_.end()) return;
  const auto pos = static_cast<int64_t>(it - order_.begin()) + direction;
  if (pos < 0 || pos >= static_cast<int64_t>(order_.size())) return;
  start_gather(order_[static_cast<size_t>(pos)]);
}

torch::Tensor ShardedModel::run(torch::nn::Module& module,
                                const std::function<torch::Tensor()>& forward) {
  std::unique_lock<std::recursive_mutex> lock(mu_);
  size_t u = units_.size();
  for (size_t i = 0; i < units_.size(); ++i)
    if (units_[i].module == &module) u = i;
  if (u == units_.size()) {
    lock.unlock();
    return forward();
  }
  if (!units_[u].announced) {
    units_[u].announced = true;
    order_.push_back(u);
  }
  ensure_gathered(u);  // ZeRO-1/2: an all-gather after_step started may still run
  if (frees_units()) prefetch_after(u, +1);
  lock.unlock();
  torch::Tensor out = forward();
  lock.lock();
  if (!frees_units()) return out;
  if (torch::GradMode::is_enabled() && out.requires_grad()) {
    std::weak_ptr<ShardedModel> self = weak_from_this();
    out.register_hook([self, u](const torch::Tensor&) {
      if (auto m = self.lock()) m->pre_backward(u);
    });
    // The unit that runs last in the forward is the first one the backward needs: freeing it
    // would only gather it again at once (FSDP leaves it gathered too).
    const bool runs_last = order_known_ && u == order_.back();
    if (opts_.reshard_after_forward && !runs_last) release(u);
  } else {
    release(u);
  }
  return out;
}

void ShardedModel::pre_backward(size_t u) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  ensure_gathered(u);
  prefetch_after(u, -1);
}

void ShardedModel::prepare(bool sync) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  sync_ = sync;
}

void ShardedModel::on_grad_ready(size_t k) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (param_ready_[k]) return;
  if (!callback_queued_) {
    std::weak_ptr<ShardedModel> self = weak_from_this();
    at_backward_end([self] {
      if (auto m = self.lock()) m->finalize();
    });
    callback_queued_ = true;
    reduced_ = false;
  }
  param_ready_[k] = true;
  sample_peak();
  const size_t u = unit_of_[k];
  if (++units_[u].ready == units_[u].params.size()) unit_backward_done(u);
}

void ShardedModel::unit_backward_done(size_t u) {
  if (sync_) launch_ready();
  if (frees_units() && units_[u].announced) release(u);
}

// Units reduce strictly from the last to the first, so every rank issues the same collectives
// in the same order.
void ShardedModel::launch_ready() {
  while (next_launch_ < units_.size()) {
    const size_t u = units_.size() - 1 - next_launch_;
    if (units_[u].ready < units_[u].params.size()) break;
    launch_reduce(u);
    ++next_launch_;
    // Each launched unit holds a full-size flat gradient until its reduce-scatter is finished.
    // Finishing them all only at the end of the backward pass would hold the whole model's
    // gradient at once (4 bytes per parameter on every rank, measured: ZeRO-3's peak host memory
    // was then no lower than DDP's); a few in flight keep the overlap with compute.
    in_flight_.push_back(u);
    while (in_flight_.size() > kReducesInFlight) {
      finish_reduce(in_flight_.front());
      in_flight_.pop_front();
    }
  }
}

void ShardedModel::finish_reduce(size_t u) {
  Unit& unit = units_[u];
  for (size_t i = 0; i < unit.reducing.size(); ++i)
    finish_reduce_scatter(*comm_, *unit.groups[i], unit.reducing[i], what("reduce-scatter", u));
  unit.reducing.clear();
}

void ShardedModel::launch_reduce(size_t u) {
  Unit& unit = units_[u];
  torch::NoGradGuard no_grad;
  for (auto& g : unit.groups) {
    torch::Tensor flat = g->flat_grad(opts_.reduce_dtype.value_or(g->master_dtype()));
    if (opts_.stage >= ShardStage::kGradients)
      for (const auto& p : g->params()) p.mutable_grad().reset();
    unit.reducing.push_back(start_reduce_scatter(*comm_, *g, flat, what("reduce-scatter", u)));
  }
  sample_peak();
  unit.launched = true;
}

void ShardedModel::finalize() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (reduced_) return;
  // Parameters that took no part in this backward still join (other ranks may have used them).
  for (size_t k = 0; k < params_.size(); ++k) {
    if (param_ready_[k]) continue;
    param_ready_[k] = true;
    ++units_[unit_of_[k]].ready;
  }
  if (sync_) {
    launch_ready();
    GPULAB_ASSERT(next_launch_ == units_.size(), "a unit's gradient was never reduced");
    for (size_t u : in_flight_) finish_reduce(u);
    in_flight_.clear();
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    units_[u].ready = 0;
    units_[u].launched = false;
    if (frees_units() && units_[u].announced) release(u);
  }
  pool_.clear();  // the optimizer step's peak is as without the pool
  std::fill(param_ready_.begin(), param_ready_.end(), false);
  next_launch_ = 0;
  callback_queued_ = false;
  order_known_ = !order_.empty();
  reduced_ = sync_;
}

void ShardedModel::finish() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (!sync_) return;
  if (!reduced_) finalize();  // no backward hook ran (nothing required grad)
  reduced_ = false;
}

void ShardedModel::after_step() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  for (auto& unit : units_)
    for (auto& g : unit.groups) g->shard().mutable_grad().reset();
  // Units the model runs through run() are waited for there, each just before its forward, so
  // their all-gathers overlap the forward of the units before them; they are started in the
  // order the model runs them. The rest (the root: embeddings, final norm, output) are needed
  // first and waited for here. ZeRO-3 leaves its units freed until they run.
  std::vector<size_t> now, later;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u].announced) continue;
    now.push_back(u);
  }
  if (!frees_units()) later = order_;
  for (size_t u : now) restart_gather(u);
  for (size_t u : later) restart_gather(u);
  for (size_t u : now) ensure_gathered(u);
}

void ShardedModel::restart_gather(size_t u) {
  // The buffer keeps its memory and the old values: the all-gather writes over them.
  for (auto& g : units_[u].groups) g->mark_stale();
  start_gather(u);
}

void ShardedModel::gather_all() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // The shards are the truth (a checkpoint may just have replaced them): units still gathered
  // hold older values, so they gather again too.
  for (auto& unit : units_)
    if (unit.gathering.empty())
      for (auto& g : unit.groups) g->release();
  for (size_t u = 0; u < units_.size(); ++u) start_gather(u);
  for (size_t u = 0; u < units_.size(); ++u) ensure_gathered(u);
}

void ShardedModel::gather_master() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  bool mixed = false;
  for (auto& unit : units_)
    for (auto& g : unit.groups) mixed = mixed || g->compute_dtype() != g->master_dtype();
  if (!mixed) return gather_all();
  for (size_t u = 0; u < units_.size(); ++u)
    if (!units_[u].gathering.empty()) ensure_gathered(u);  // no collective left half done
  struct Pending {
    FlatGroup* group;
    torch::Tensor full, shard;
    WorkPtr work;
  };
  std::vector<Pending> pending;
  for (size_t u = 0; u < units_.size(); ++u)
    for (auto& g : units_[u].groups) {
      Pending p{g.get(), torch::empty({g->padded_numel()}, g->shard().options()),
                g->shard().detach(), WorkPtr()};
      if (comm_->size() == 1)
        p.full.copy_(p.shard);
      else
        p.work = comm_->allgather_async(p.full, p.shard, what("all-gather (master)", u));
      pending.push_back(std::move(p));
    }
  for (auto& p : pending) {
    if (p.work) comm_->wait(p.work, "all-gather of the master weights");
    p.group->adopt_master(p.full);
  }
}

std::vector<torch::Tensor> ShardedModel::decay_shards() const {
  std::vector<torch::Tensor> out;
  for (const auto& unit : units_)
    for (size_t i = 0; i < unit.groups.size(); ++i)
      if (unit.decays[i]) out.push_back(unit.groups[i]->shard());
  return out;
}

std::vector<torch::Tensor> ShardedModel::no_decay_shards() const {
  std::vector<torch::Tensor> out;
  for (const auto& unit : units_)
    for (size_t i = 0; i < unit.groups.size(); ++i)
      if (!unit.decays[i]) out.push_back(unit.groups[i]->shard());
  return out;
}

std::vector<torch::Tensor> ShardedModel::all_shards() const {
  auto out = decay_shards();
  auto nd = no_decay_shards();
  out.insert(out.end(), nd.begin(), nd.end());
  return out;
}

ShardMemory ShardedModel::memory() const {
  ShardMemory m;
  for (const auto& unit : units_)
    for (const auto& g : unit.groups) {
      if (g->allocated()) m.params_full += g->full_bytes();
      m.params_shard += g->shard_bytes();
      if (g->shard().grad().defined()) m.grads_shard += g->shard_bytes();
    }
  m.params_full += pool_.bytes();  // freed buffers kept for the next gathers
  for (const auto& unit : units_)
    for (const auto& r : unit.reducing) {
      auto bytes = [](const torch::Tensor& t) { return t.defined() ? t.nbytes() : size_t{0}; };
      m.grads_flat += static_cast<int64_t>(bytes(r.flat) + bytes(r.out));
      for (const auto& in : r.incoming) m.grads_flat += static_cast<int64_t>(bytes(in));
    }
  for (const auto& p : params_)
    if (p.grad().defined()) m.grads_full += p.grad().numel() * p.grad().element_size();
  return m;
}

void ShardedModel::start_peak() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  tracking_peak_ = true;
  peak_ = ShardMemory();
  sample_peak();
}

ShardMemory ShardedModel::stop_peak() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  tracking_peak_ = false;
  return peak_;
}

void ShardedModel::sample_peak() {
  if (!tracking_peak_) return;
  const ShardMemory m = memory();
  auto total = [](const ShardMemory& x) {
    return x.params_full + x.params_shard + x.grads_full + x.grads_flat + x.grads_shard;
  };
  if (total(m) > total(peak_)) peak_ = m;
}

std::vector<ShardedModel::UnitInfo> ShardedModel::layout() const {
  std::vector<UnitInfo> out;
  for (const auto& unit : units_) {
    UnitInfo info{unit.name, {}, frees_units() && unit.announced};
    for (const auto& g : unit.groups) info.groups.push_back(g.get());
    out.push_back(std::move(info));
  }
  return out;
}

std::vector<FlatGroup*> ShardedModel::groups() {
  std::vector<FlatGroup*> out;
  for (auto& unit : units_)
    for (auto& g : unit.groups) out.push_back(g.get());
  return out;
}

}  // namespace gpulab::train::dist
