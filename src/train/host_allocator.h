// The C library's heap as a training process wants it: the memory a step frees kept for the next
// step, not handed back to the kernel and faulted in again (zeroed pages) on every step.
#pragma once

namespace gpulab::train {

// glibc only (elsewhere nothing): blocks up to 32 MiB come from the heap from the start, and up
// to 256 MiB of free heap top stays mapped. A GRPO step of a small model on the CPU spent about
// 15 % less outside generation with it; llama-125m bf16 training went from 0.967x to 1.016x
// PyTorch 2.15's tokens/s (docs/benchmarks.md, session 55). Not for
// runs whose layout is chosen for memory (ZeRO, TP, PP): the kept heap took ZeRO-3 ranks over an
// 800 MiB cap they fit without it (shard.memory_cap).
void keep_freed_host_memory();

}  // namespace gpulab::train
