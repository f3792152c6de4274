// Kineto's start and stop around the profiled work (op_profile.h).
#include "bench/op_profile.h"

#include <set>
#include <utility>

#include <torch/csrc/autograd/profiler_kineto.h>

namespace gpulab::bench {

namespace {

namespace kineto = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities_for(const torch::Device& device) {
  std::set<ActivityType> a{ActivityType::CPU};
  if (device.is_cuda()) a.insert(ActivityType::CUDA);
  return a;
}

}  // namespace

OpProfile::OpProfile(std::string file, const torch::Device& device) : file_(std::move(file)) {
  const ProfilerConfig config(ProfilerState::KINETO);
  const auto activities = activities_for(device);
  kineto::prepareProfiler(config, activities);
  kineto::enableProfiler(config, activities);
  running_ = true;
}

OpProfile::~OpProfile() {
  try {
    finish();
  } catch (...) {  // a destructor must not throw; the trace is then missing, which its reader says
  }
}

void OpProfile::finish() {
  if (!running_) return;
  running_ = false;
  auto result = kineto::disableProfiler();
  if (result) result->save(file_);
}

}  // namespace gpulab::bench
