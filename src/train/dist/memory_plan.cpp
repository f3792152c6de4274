// Memory planner: model footprint, per-stage bytes, communication volume, GPU sizes.
#include "train/dist/memory_plan.h"

#include <c10/core/CPUAllocator.h>
#include <fmt/format.h>
#include <torch/version.h>

#include <algorithm>
#include <mutex>
#include <numeric>
#include <set>
#include <unordered_map>

#include "core/int_math.h"

namespace gpulab::train::dist {

namespace {

// Elements of unit u this rank holds as its shard (each group padded to a multiple of the
// world size); the unit's flat gradient is `world` times that.
int64_t unit_shard_elements(const ModelFootprint& f, size_t u, int world) {
  int64_t n = 0;
  for (int64_t g : f.units[u]) n += ceil_div(g, world);
  return n;
}

// Elements this rank holds as shards.
int64_t shard_elements(const ModelFootprint& f, int world) {
  int64_t n = 0;
  for (size_t u = 0; u < f.units.size(); ++u) n += unit_shard_elements(f, u, world);
  return n;
}

// Bytes of unit u's gathered parameters (or their full gradients): compute copies of `compute`
// bytes per element, groups that keep the master dtype at the parameters' own size.
int64_t unit_bytes(const ModelFootprint& f, size_t u, int64_t compute) {
  int64_t n = 0;
  for (size_t i = 0; i < f.units[u].size(); ++i) {
    const bool keeps =
        u < f.keeps_master.size() && i < f.keeps_master[u].size() && f.keeps_master[u][i];
    n += f.units[u][i] * (keeps ? f.param_bytes : compute);
  }
  return n;
}

int64_t all_units_bytes(const ModelFootprint& f, int64_t compute) {
  int64_t n = 0;
  for (size_t u = 0; u < f.units.size(); ++u) n += unit_bytes(f, u, compute);
  return n;
}

// Bytes of units that stay gathered under ZeRO-3 (the root and units not run via run_unit).
int64_t resident_bytes(const ModelFootprint& f, int64_t compute) {
  int64_t n = 0;
  for (size_t u = 0; u < f.units.size(); ++u)
    if (!f.frees[u]) n += unit_bytes(f, u, compute);
  return n;
}

// The largest sum of `width` consecutive values (all of them when there are fewer): units that
// are alive together are neighbours in the order the model runs them (the units' order here).
double largest_window(const std::vector<double>& values, size_t width) {
  const size_t w = std::min(width, values.size());
  double best = 0;
  for (size_t i = 0; i + w <= values.size(); ++i)
    best =
        std::max(best, std::accumulate(values.begin() + static_cast<std::ptrdiff_t>(i),
                                       values.begin() + static_cast<std::ptrdiff_t>(i + w), 0.0));
  return best;
}

// Counts the bytes of CPU tensors alive between allocation and release: what a forward pass
// leaves behind for its backward is what autograd keeps (address reuse cannot hide anything).
// The context is the data pointer itself, as raw allocations (oneDNN's) require.
class CountingAllocator : public at::Allocator {
 public:
  explicit CountingAllocator(at::Allocator* inner) : inner_(inner) {}
  at::DataPtr allocate(size_t n) override { return counted(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  at::DeleterFnPtr raw_deleter() const override { return &release; }
  static int64_t live() {
    std::lock_guard<std::mutex> lock(mu_);
    return live_;
  }

 private:
  struct Held {
    at::DataPtr inner;
    size_t bytes;
  };
  at::DataPtr counted(size_t n) const {
    at::DataPtr inner = inner_->allocate(n);
    void* data = inner.get();
    {
      std::lock_guard<std::mutex> lock(mu_);
      held_.emplace(data, Held{std::move(inner), n});
      live_ += static_cast<int64_t>(n);
    }
    return {data, data, &release, at::Device(at::kCPU)};
  }
  static void release(void* data) {
    at::DataPtr inner;  // freed outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    auto it = held_.find(data);
    if (it == held_.end()) return;
    live_ -= static_cast<int64_t>(it->second.bytes);
    inner = std::move(it->second.inner);
    held_.erase(it);
  }
  at::Allocator* inner_;
  static inline std::mutex mu_;
  static inline std::unordered_map<void*, Held> held_;
  static inline int64_t live_ = 0;
};

}  // namespace

ModelFootprint measure_footprint(torch::nn::Module& model, const std::string& wrap,
                                 const std::function<torch::Tensor()>& forward, int64_t samples) {
  ModelFootprint f;
  std::set<const void*> assigned;
  const auto master_only = master_dtype_params(model);  // grouped as ShardedModel does
  auto add_unit = [&](std::vector<torch::Tensor> params, bool frees) {
    int64_t parts[2][2] = {{0, 0}, {0, 0}};  // [decays][keeps master dtype]
    for (auto& p : params) {
      if (!p.requires_grad() || !assigned.insert(p.unsafeGetTensorImpl()).second) continue;
      parts[p.dim() <= 1 ? 0 : 1][master_only.count(p.unsafeGetTensorImpl()) ? 1 : 0] += p.numel();
      f.params += p.numel();
      f.param_bytes = static_cast<int64_t>(p.element_size());
    }
    std::vector<int64_t> groups;
    std::vector<bool> keeps;
    for (int decay : {1, 0})
      for (int master : {0, 1})
        if (parts[decay][master]) {
          groups.push_back(parts[decay][master]);
          keeps.push_back(master == 1);
        }
    if (!groups.empty()) {
      f.units.push_back(groups);
      f.keeps_master.push_back(keeps);
      f.frees.push_back(frees);
    }
  };
  auto units = choose_units(model, wrap);
  // Which units the model runs through run_unit: watch one forward.
  struct Watch : UnitHooks {
    std::set<const torch::nn::Module*> ran;
    int64_t input_bytes = 0;
    torch::Tensor run(torch::nn::Module& unit, const std::function<torch::Tensor()>& fwd) override {
      ran.insert(&unit);
      auto out = fwd();
      input_bytes += out.numel() * static_cast<int64_t>(out.element_size());
      return out;
    }
  } watch;
  UnitHooks* before = unit_hooks();
  set_unit_hooks(&watch);
  // Activations: the bytes a training-mode forward leaves alive, output included.
  at::Allocator* original = c10::GetCPUAllocator();
  CountingAllocator counting(original);
  c10::SetCPUAllocator(&counting);
  const int64_t before_forward = CountingAllocator::live();
  int64_t kept = 0;
  try {
    torch::Tensor out = forward();
    kept = CountingAllocator::live() - before_forward;
  } catch (...) {
    c10::SetCPUAllocator(original);
    set_unit_hooks(before);
    throw;
  }
  c10::SetCPUAllocator(original);
  set_unit_hooks(before);
  f.activation_bytes_per_sample = kept / samples;
  f.unit_input_bytes_per_sample = watch.input_bytes / samples;
  for (auto& w : units) add_unit(w.module->parameters(), watch.ran.count(w.module) > 0);
  add_unit(model.parameters(), false);  // the root: whatever no unit holds
  for (const auto& b : model.buffers())
    f.buffer_bytes += b.numel() * static_cast<int64_t>(b.element_size());
  return f;
}

ModelFootprint footprint_of(const ShardedModel& sharded) {
  ModelFootprint f;
  for (const auto& unit : sharded.layout()) {
    std::vector<int64_t> groups;
    std::vector<bool> keeps;
    for (const auto* g : unit.groups) {
      groups.push_back(g->numel());
      keeps.push_back(g->compute_dtype() == g->master_dtype());
      f.params += g->numel();
      f.param_bytes = static_cast<int64_t>(g->shard().element_size());
    }
    f.units.push_back(groups);
    f.keeps_master.push_back(keeps);
    f.frees.push_back(unit.frees);
  }
  return f;
}

int optimizer_state_tensors(const torch::optim::Optimizer& opt) {
  if (dynamic_cast<const torch::optim::Adam*>(&opt) ||
      dynamic_cast<const torch::optim::AdamW*>(&opt))
    return 2;
  if (auto* sgd = dynamic_cast<const torch::optim::SGD*>(&opt)) {
    const auto& g = sgd->param_groups();
    const auto& o = static_cast<const torch::optim::SGDOptions&>(g.front().options());
    return o.momentum() != 0 ? 1 : 0;
  }
  return 1;
}

namespace {

int64_t compute_bytes(const ModelFootprint& f, const PlanQuery& q) {
  return q.stage == ShardStage::kNone || q.compute_bytes <= 0 ? f.param_bytes : q.compute_bytes;
}

int64_t reduce_bytes(const ModelFootprint& f, const PlanQuery& q) {
  return q.stage == ShardStage::kNone || q.reduce_bytes <= 0 ? f.param_bytes : q.reduce_bytes;
}

}  // namespace

MemoryParts plan_after_step(const ModelFootprint& f, const PlanQuery& q) {
  MemoryParts m;
  const int64_t b = f.param_bytes;
  const int64_t full = f.params * b;
  const int64_t full_compute = all_units_bytes(f, compute_bytes(f, q));  // what the model runs on
  const int64_t shard = shard_elements(f, q.world) * b;  // master shards, fp32 gradients
  m.buffers = f.buffer_bytes;
  switch (q.stage) {
    case ShardStage::kNone:
      m.params = full;
      m.grads = full;
      m.optimizer = q.optimizer_states * full;
      break;
    case ShardStage::kOptimizer:
      m.params = full_compute + shard;  // full parameters and the master shard
      m.grads = full_compute + shard;   // full gradients and the reduced shard
      m.optimizer = q.optimizer_states * shard;
      break;
    case ShardStage::kGradients:
      m.params = full_compute + shard;
      m.grads = shard;
      m.optimizer = q.optimizer_states * shard;
      break;
    case ShardStage::kFull:
      m.params = shard + resident_bytes(f, compute_bytes(f, q));
      m.grads = shard;
      m.optimizer = q.optimizer_states * shard;
      break;
  }
  return m;
}

MemoryParts plan_peak(const ModelFootprint& f, const PlanQuery& q) {
  MemoryParts m = plan_after_step(f, q);
  const int64_t c = compute_bytes(f, q);
  if (q.stage == ShardStage::kFull) {  // the running unit and the prefetched neighbour
    std::vector<double> freed;
    for (size_t u = 0; u < f.units.size(); ++u)
      if (f.frees[u]) freed.push_back(static_cast<double>(unit_bytes(f, u, c)));
    m.params += static_cast<int64_t>(largest_window(freed, 2));
  }
  // Gradients in flight (sharded_model.cpp): up to kReducesInFlight + 1 units' flat gradients in
  // the reduce dtype at once, each with what it receives (Gloo's pairwise exchange: N-1 slices
  // of 1/N of it; NCCL: this rank's slice), while those units' gradient shards (counted above)
  // do not exist yet. ZeRO-2/3 have freed those units' whole gradients by then; ZeRO-1 keeps
  // every whole gradient (counted above) and reduces the same way.
  if (q.stage >= ShardStage::kOptimizer) {
    const double n = static_cast<double>(q.world);
    const double received = q.world <= 1 ? 0.0 : q.pairwise_reduce ? (n - 1) / n : 1.0 / n;
    std::vector<double> extra;  // per unit, in the order they reduce (from the last one)
    for (size_t u = f.units.size(); u-- > 0;) {
      const auto shard_elements = static_cast<double>(unit_shard_elements(f, u, q.world));
      const double flat = shard_elements * n * static_cast<double>(reduce_bytes(f, q));
      const double shard = shard_elements * static_cast<double>(f.param_bytes);
      extra.push_back(std::max(0.0, flat * (1.0 + received) - shard));
    }
    m.grads += static_cast<int64_t>(largest_window(extra, kReducesInFlight + 1));
  }
  const double per_sample = q.activation_checkpointing
                                ? static_cast<double>(f.unit_input_bytes_per_sample) +
                                      static_cast<double>(f.activation_bytes_per_sample) /
                                          static_cast<double>(std::max<size_t>(1, f.units.size()))
                                : static_cast<double>(f.activation_bytes_per_sample);
  m.activations =
      static_cast<int64_t>(per_sample * q.activation_scale * static_cast<double>(q.batch_size));
  return m;
}

int64_t comm_bytes_per_step(const ModelFootprint& f, const PlanQuery& q) {
  if (q.world <= 1) return 0;
  const double frac = static_cast<double>(q.world - 1) / q.world;
  const double n = static_cast<double>(f.params);
  const double b = static_cast<double>(f.param_bytes);
  const double c = static_cast<double>(compute_bytes(f, q));
  const double r = static_cast<double>(reduce_bytes(f, q));
  double per_element = 0;  // each pass moves (N-1)/N of the model per rank
  switch (q.stage) {
    case ShardStage::kNone:
      per_element = 2 * b;  // ring all-reduce
      break;
    case ShardStage::kOptimizer:
    case ShardStage::kGradients:
      per_element = r + c;  // reduce-scatter + all-gather
      break;
    case ShardStage::kFull:
      per_element = r + 2 * c;  // reduce-scatter + all-gather in forward and in backward
      break;
  }
  return static_cast<int64_t>(per_element * frac * n);
}

const std::vector<std::string>& known_gpus() {
  static const std::vector<std::string> names{"h100", "h200",   "a100",   "a100-40",
                                              "l40s", "mi300x", "mi250x", "rtx4090"};
  return names;
}

int64_t device_memory_bytes(const std::string& gpu) {
  const int64_t gib = int64_t{1} << 30;
  if (gpu == "h100") return 80 * gib;
  if (gpu == "h200") return 141 * gib;
  if (gpu == "a100") return 80 * gib;
  if (gpu == "a100-40") return 40 * gib;
  if (gpu == "l40s") return 48 * gib;
  if (gpu == "mi300x") return 192 * gib;
  if (gpu == "mi250x") return 64 * gib;  // one GCD
  if (gpu == "rtx4090") return 24 * gib;
  return 0;
}

std::string human_bytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  return fmt::format("{:.1f} KiB", b / 1024.0);
}

}  // namespace gpulab::train::dist
