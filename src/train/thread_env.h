// OpenMP's wait policy for intra-op threads, chosen before libgomp reads its environment: on a
// shared or oversubscribed CPU, threads that spin at every op's barrier steal the core their
// late peer needs (ResNet-18 trained 3-7x slower at load 6-8 on 2 cores with GNU OpenMP's
// default spinning). gpulab's commands that compute (train, bench, gpu-test, infer) therefore
// run with OMP_WAIT_POLICY=PASSIVE unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT.
#pragma once

#include <string>

namespace gpulab::train {

// The wait policy this process runs with: "passive (gpulab default)", the user's
// OMP_WAIT_POLICY / GOMP_SPINCOUNT, or "default" (libgomp's spin-then-sleep).
std::string omp_wait_policy();

}  // namespace gpulab::train
