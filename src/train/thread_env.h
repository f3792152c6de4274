// OpenMP's wait policy for intra-op threads, chosen before libgomp reads its environment. GNU
// OpenMP's default spins ~300,000 times at every op's barrier: on a shared or oversubscribed
// CPU the spinners steal the core their late peer needs (ResNet-18 trained 3-7x slower at load
// 6-8 on 2 cores). Sleeping at once (OMP_WAIT_POLICY=PASSIVE) fixes that but costs ~20 % on an
// idle machine, where the next op's region starts microseconds later. A short bounded spin
// (GOMP_SPINCOUNT=1000) measured as fast as spinning when idle and best under load, so
// gpulab's training commands (train, bench, infer) run with it unless the user
// set OMP_WAIT_POLICY or GOMP_SPINCOUNT, or the program runs under another loader (valgrind,
// ld.so run by hand), where it keeps libgomp's default rather than re-execute the wrong file.
#pragma once

#include <string>

namespace gpulab::train {

// The wait policy this process runs with: "GOMP_SPINCOUNT=1000 (gpulab default)", the user's
// OMP_WAIT_POLICY / GOMP_SPINCOUNT, or "default" (libgomp's spin-then-sleep).
std::string omp_wait_policy();

}  // namespace gpulab::train
