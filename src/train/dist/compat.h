// The thin layer over c10d: the class collectives live on, whether Gloo and NCCL are compiled in,
// and the headers.
#pragma once

#include <torch/version.h>

#include <utility>

#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

// Gloo is compiled in only where its headers are (GPULAB_HAVE_GLOO: cmake/Torch.cmake found
// gloo/algorithm.h; `make deps` puts Debian sid's beside the wheel, which ships none). Without
// them a build has NCCL and no Gloo, which is supported. The c10d header is guarded by the macro
// libtorch's own build defines.
#if defined(GPULAB_HAVE_GLOO) && GPULAB_HAVE_GLOO
#if !defined(USE_C10D_GLOO)
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define GPULAB_DIST_GLOO 1
#else
#define GPULAB_DIST_GLOO 0
#endif

// ProcessGroupNCCL.hpp ships with every libtorch, but only a build with NCCL (or RCCL on ROCm)
// defines USE_C10D_NCCL and has its symbols; its header needs nccl.h (rccl.h on ROCm), which a
// wheel keeps in the NCCL wheel beside it (cmake/Dependencies.cmake finds it there).
#if defined(USE_C10D_NCCL) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>) && \
    (__has_include(<nccl.h>) || __has_include(<rccl/rccl.h>) || __has_include(<rccl.h>))
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define GPULAB_DIST_NCCL 1
#else
#define GPULAB_DIST_NCCL 0
#endif

namespace gpulab::train::dist {

// ProcessGroupGloo/NCCL derive from c10d::Backend (ProcessGroup is a dispatcher over backends);
// gpulab holds the backend itself, which runs the collectives.
using BackendBase = ::c10d::Backend;
using BackendPtr = c10::intrusive_ptr<BackendBase>;
using WorkPtr = c10::intrusive_ptr<::c10d::Work>;

// A parameter's gradient accumulator (the reducer only holds it to keep its hook alive).
using GradAccumulatorPtr =
    decltype(torch::autograd::impl::grad_accumulator(std::declval<const at::Tensor&>()));

inline ::c10d::AllreduceOptions sum_options() {
  ::c10d::AllreduceOptions o;
  o.reduceOp = ::c10d::ReduceOp(::c10d::ReduceOp::SUM);
  return o;
}

}  // namespace gpulab::train::dist
