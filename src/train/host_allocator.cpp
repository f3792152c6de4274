// The heap's thresholds for a training process (host_allocator.h).
#include "train/host_allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gpulab::train {

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  // Setting either one stops glibc's sliding mmap threshold, so both are set. 32 MiB is the
  // highest that threshold slides to by itself: at 4 MiB a bf16 llama-125m step mapped and
  // faulted in each MLP weight's float32 gradient (6 MiB) again, 4-5.5 ms a weight on average.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace gpulab::train
