// `gpulab plan`'s mesh table: each layout's per-GPU memory (parameters, gradients, optimizer
// state, activations four ways) and the recommended layout with its reason and command.
#include "plan_mesh.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/table.h"
#include "train/dist/memory_plan.h"

namespace gpulab::cli {
namespace {

namespace tp = train::parallel;
using train::dist::human_bytes;

std::string shard_label(int shard) {
  static const char* names[] = {"none", "optimizer", "gradients", "full"};
  return names[shard];
}

// "19/21/21/19": the layers of each pipeline stage (first and last also hold the embedding and
// the output layer); "min-max" past four stages.
std::string stage_split(const tp::MeshPlanQuery& q, const tp::LayoutPlan& p) {
  const auto layers = tp::stage_layers(q.base.model, p.pp, q.base.seq_len);
  if (layers.size() > 4) {
    auto [lo, hi] = std::minmax_element(layers.begin(), layers.end());
    return fmt::format("{}-{}", *lo, *hi);
  }
  std::string s;
  for (int64_t n : layers) s += (s.empty() ? "" : "/") + std::to_string(n);
  return s;
}

std::string fit_label(tp::FitLevel f) {
  return f == tp::FitLevel::kNone ? "yes" : f == tp::FitLevel::kFull ? "checkpointing" : "no";
}

void add_layout_row(TextTable& t, const tp::MeshPlanQuery& q, const tp::LayoutPlan& p) {
  const auto& m = p.held();
  t.add_row({std::to_string(p.tp), std::to_string(p.pp), std::to_string(p.dp), shard_label(p.shard),
             stage_split(q, p), human_bytes(m.params), human_bytes(m.grads),
             human_bytes(m.optimizer), human_bytes(p.tp_alone.activations),
             human_bytes(p.sp.activations), human_bytes(p.no_scores.activations),
             human_bytes(p.full.activations), human_bytes(m.total()), fit_label(p.fit)});
}

void print_header(const tp::MeshPlanQuery& q, const std::string& gpu) {
  const auto& b = q.base;
  std::printf(
      "\nDevice mesh layouts on %d x %s (%s each), %d GPUs a node: TP inside a node, PP next, "
      "data parallel (DDP or ZeRO) outermost. Per GPU, the pipeline stage that holds the most; "
      "%lld-token sequences, %lld a micro-batch, max(--grad_accum, PP) micro-batches a step "
      "(1F1B: stage s keeps PP - s in flight); %lld bytes a parameter + %lld a gradient + %lld "
      "of optimizer state, %lld-byte activations by Korthikanti et al. 2022 (sequence parallel "
      "on with TP; 'no scores': attention that keeps no softmax scores, as gpulab's kernel and "
      "SDPA, the same as the paper's selective recomputation, and what 'fits' assumes without "
      "recomputation; 'full': activation checkpointing). Tensors only: leave a few GiB for the "
      "runtime (CUDA/HIP context, communicator buffers, fragmentation)\n",
      q.gpus, gpu.c_str(), human_bytes(q.capacity_bytes).c_str(), q.gpus_per_node,
      static_cast<long long>(b.seq_len), static_cast<long long>(b.micro_batch),
      static_cast<long long>(b.param_bytes), static_cast<long long>(b.grad_bytes),
      static_cast<long long>(b.optimizer_bytes), static_cast<long long>(b.activation_bytes));
}

void print_recommendation(const tp::MeshPlanQuery& q, const tp::LayoutPlan& p,
                          const std::string& reason) {
  std::printf("Recommended: TP %d x PP %d x DP %d, --shard %s%s: %s.\n", p.tp, p.pp, p.dp,
              shard_label(p.shard).c_str(),
              p.fit == tp::FitLevel::kFull ? ", --activation_checkpointing" : "", reason.c_str());
  std::printf(
      "  gpulab train --model %s --nproc_per_node %d --nnodes %d --tp %d --pp %d --shard %s%s\n"
      "  (--tp and --pp: docs/parallelism.md says which gpulab train takes yet)\n",
      q.model.name.c_str(), std::min(q.gpus, q.gpus_per_node),
      std::max(1, q.gpus / q.gpus_per_node), p.tp, p.pp, shard_label(p.shard).c_str(),
      p.fit == tp::FitLevel::kFull ? " --activation_checkpointing" : "");
}

// Nothing fits: the layout that comes closest and what it lacks.
void print_nothing_fits(const tp::MeshPlanQuery& q, const std::vector<tp::LayoutPlan>& all) {
  auto closest = std::min_element(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.held().total() < b.held().total();
  });
  std::printf(
      "Nothing fits on %d GPUs: the smallest need, TP %d x PP %d x DP %d --shard %s with full "
      "recomputation, is %s a GPU against %s. Use more GPUs (or a larger one), a shorter "
      "--seq_len or a smaller micro-batch.\n",
      q.gpus, closest->tp, closest->pp, closest->dp, shard_label(closest->shard).c_str(),
      human_bytes(closest->held().total()).c_str(), human_bytes(q.capacity_bytes).c_str());
}

}  // namespace

void print_mesh_plan(const tp::MeshPlanQuery& q, const std::vector<tp::LayoutPlan>& layouts,
                     const std::string& gpu) {
  const auto best = tp::recommend_layout(layouts, q);
  print_header(q, gpu);
  TextTable t({"tp", "pp", "dp", "shard", "layers/stage", "params", "grads", "optimizer",
               "act TP alone", "act +SP", "act +SP no scores", "act full recompute", "total",
               "fits"});
  size_t fitting = 0;
  for (const auto& p : layouts) {
    if (best && p.fit == tp::FitLevel::kNoFit) continue;  // only those that fit, when any does
    add_layout_row(t, q, p);
    ++fitting;
  }
  std::printf("%s", t.render().c_str());
  if (!best) return print_nothing_fits(q, layouts);
  std::printf(
      "%zu of %zu layouts fit (total: without recomputation where it fits, else with "
      "activation checkpointing).\n",
      fitting, layouts.size());
  print_recommendation(q, layouts[best->index], best->reason);
}

}  // namespace gpulab::cli
