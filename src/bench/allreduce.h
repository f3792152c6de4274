// `gpulab bench allreduce`: all-reduce time and bandwidth over a sweep of message sizes on the
// backend in use (Gloo on CPU, NCCL/RCCL on GPUs), reported as nccl-tests defines it:
// algbw = bytes / time, busbw = algbw * 2(n-1)/n (what each link carries in a ring).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/dist/communicator.h"

namespace gpulab::bench {

struct AllreduceBenchOptions {
  int64_t min_bytes = 1024;
  int64_t max_bytes = 64ll << 20;
  int64_t step_factor = 4;  // sizes grow by this factor
  int64_t warmup = 3;
  int64_t iters = 10;
  std::string dtype = "fp32";  // fp32 | fp16 | bf16 | fp64
};

struct AllreduceRow {
  int64_t bytes = 0;
  int64_t count = 0;   // elements
  double time_us = 0;  // mean per all-reduce, slowest rank
  double algbw_gbs = 0;
  double busbw_gbs = 0;
  int64_t wrong = 0;  // elements that differ from the expected sum in the check
};

// Bus bandwidth factor of nccl-tests for all-reduce: 2(n-1)/n.
double allreduce_bus_factor(int ranks);

// Runs the sweep collectively (every rank calls it); every rank gets the same rows.
std::vector<AllreduceRow> run_allreduce_bench(train::dist::Communicator& comm,
                                              const AllreduceBenchOptions& opts);

// nccl-tests style table, one row per size.
std::string format_allreduce_table(const std::vector<AllreduceRow>& rows, const std::string& dtype,
                                   int ranks);

}  // namespace gpulab::bench
