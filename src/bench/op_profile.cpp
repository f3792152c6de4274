// Kineto's start and stop around the profiled work (op_profile.h).
#include "bench/op_profile.h"

#include <set>
#include <utility>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

namespace gpulab::bench {

namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// The host's ops always; a visible GPU's kernels too (a run on the CPU records none of them).
std::set<ActivityType> activities() {
  std::set<ActivityType> a{ActivityType::CPU};
  if (torch::cuda::is_available()) a.insert(ActivityType::CUDA);
  return a;
}

}  // namespace

OpProfile::OpProfile(std::string file) : file_(std::move(file)) {
  const ProfilerConfig config(ProfilerState::KINETO);
  kineto::prepareProfiler(config, activities());
  kineto::enableProfiler(config, activities());
}

OpProfile::~OpProfile() {
  try {
    if (auto result = kineto::disableProfiler()) result->save(file_);
  } catch (...) {  // a destructor must not throw; the trace is then missing, which its reader says
  }
}

}  // namespace gpulab::bench
