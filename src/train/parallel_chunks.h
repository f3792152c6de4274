// Splitting CPU work of gpulab's own kernels between libtorch's intra-op threads. at::parallel_for
// cannot do it here: with libtorch's OpenMP backend its body is inline code that runs in parallel
// only in a file compiled with -fopenmp, and gpulab's files are not (it would void their PCH). So
// the split lives in one small file that is (parallel_chunks.cpp): an OpenMP loop on the threads
// libtorch's products already keep warm, a few microseconds to start, where handing chunks to
// libtorch's inter-op pool woke a sleeping thread per call (a fifth of a decode step's time in
// the kernel's scheduler). Builds without GCC's OpenMP (the clang sanitizer tree) take that pool.
#pragma once

#include <cstdint>

namespace gpulab::train {

using ChunkCall = void (*)(const void* context, int64_t chunk);

// Runs call(context, t) for t in [0, chunks) on up to `chunks` threads (libtorch's intra-op
// count at most); the caller's thread takes part. Inside a parallel region, one after another.
void run_chunks(int64_t chunks, ChunkCall call, const void* context);

// f(t) for t in [0, chunks), in parallel; f must not throw.
template <typename F>
void parallel_chunks(int64_t chunks, const F& f) {
  if (chunks <= 1) {
    if (chunks == 1) f(0);
    return;
  }
  run_chunks(
      chunks, [](const void* c, int64_t t) { (*static_cast<const F*>(c))(t); }, &f);
}

}  // namespace gpulab::train
