// `gpulab plan`'s device-mesh part: the (TP, PP, DP, ZeRO) layouts of a language model that fit
// the GPUs, per GPU by part, and the one to use with the reason (train/parallel/mesh_plan.h).
#pragma once

#include "train/parallel/mesh_plan.h"

namespace gpulab::cli {

// Prints the layouts that fit (all of them, marked, when none does) and the recommendation.
// `layouts`: mesh_layouts(q).
void print_mesh_plan(const train::parallel::MeshPlanQuery& q,
                     const std::vector<train::parallel::LayoutPlan>& layouts,
                     const std::string& gpu);

}  // namespace gpulab::cli
