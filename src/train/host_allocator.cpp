// The heap's thresholds for a training process (host_allocator.h).
#include "train/host_allocator.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gpulab::train {

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  // Setting either one stops glibc's sliding mmap threshold, so both are set.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

}  // namespace gpulab::train
