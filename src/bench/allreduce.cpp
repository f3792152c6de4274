// The all-reduce sweep: warm up, time `iters` in-place sums per size (the slowest rank's mean
// counts), then check one sum of known values so a wrong transport cannot report a speed.
#include "bench/allreduce.h"

#include <fmt/format.h>

#include <chrono>

#include "core/error.h"

namespace gpulab::bench {

namespace {

torch::ScalarType allreduce_dtype(const std::string& name) {
  if (name == "fp32") return torch::kFloat;
  if (name == "fp16") return torch::kHalf;
  if (name == "bf16") return torch::kBFloat16;
  if (name == "fp64") return torch::kDouble;
  throw Exception(Code::kInvalidArgument, "unknown dtype '" + name + "'",
                  "use fp32, fp16, bf16 or fp64");
}

}  // namespace

double allreduce_bus_factor(int ranks) {
  return ranks <= 1 ? 0.0 : 2.0 * (ranks - 1) / static_cast<double>(ranks);
}

std::vector<AllreduceRow> run_allreduce_bench(train::dist::Communicator& comm,
                                              const AllreduceBenchOptions& o) {
  if (o.min_bytes < 1 || o.max_bytes < o.min_bytes || o.step_factor < 2 || o.iters < 1 ||
      o.warmup < 0) {
    throw Exception(Code::kInvalidArgument,
                    "bad sweep: need 1 <= min_bytes <= max_bytes, step_factor >= 2, iters >= 1");
  }
  const auto type = allreduce_dtype(o.dtype);
  const auto opts = torch::TensorOptions().dtype(type).device(comm.device());
  const int64_t elem = static_cast<int64_t>(c10::elementSize(type));
  const int n = comm.size();
  std::vector<AllreduceRow> rows;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step_factor) {
    AllreduceRow row;
    row.count = std::max<int64_t>(1, bytes / elem);
    row.bytes = row.count * elem;
    // Zeros stay finite however often they are summed; the check below uses known values.
    auto t = torch::zeros({row.count}, opts);
    for (int64_t i = 0; i < o.warmup; ++i)
      comm.wait(comm.allreduce_async(t, "bench warm-up"), "bench warm-up");
    comm.barrier("bench barrier");
    if (comm.device().is_cuda()) torch::cuda::synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < o.iters; ++i)
      comm.wait(comm.allreduce_async(t, "bench all-reduce"), "bench all-reduce");
    if (comm.device().is_cuda()) torch::cuda::synchronize();
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The slowest rank defines the time (a collective ends when the last rank has its result).
    // The communicator sums, so each rank writes its time into its own slot and we take the max.
    auto slots = torch::zeros({n}, torch::kFloat64);
    slots[comm.rank()] = secs;
    comm.allreduce_sum(slots, "bench timing all-reduce");
    secs = slots.max().item<double>();
    row.time_us = secs / static_cast<double>(o.iters) * 1e6;
    row.algbw_gbs = static_cast<double>(row.bytes) / (row.time_us * 1e-6) / 1e9;
    row.busbw_gbs = row.algbw_gbs * allreduce_bus_factor(n);
    // Check: rank r contributes r + 1 everywhere; the sum is n(n+1)/2.
    auto check = torch::full({row.count}, static_cast<double>(comm.rank() + 1), opts);
    comm.allreduce_sum(check, "bench check all-reduce");
    const double want = n * (n + 1) / 2.0;
    row.wrong = check.to(torch::kCPU).to(torch::kDouble).ne(want).sum().item<int64_t>();
    rows.push_back(row);
  }
  return rows;
}

std::string format_allreduce_table(const std::vector<AllreduceRow>& rows, const std::string& dtype,
                                   int ranks) {
  std::string s =
      fmt::format("# all-reduce, {} rank(s), {}, sum; busbw = algbw * 2(n-1)/n\n", ranks, dtype);
  s += fmt::format("{:>12} {:>12} {:>6} {:>12} {:>12} {:>12} {:>8}\n", "size(B)", "count", "type",
                   "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  for (const auto& r : rows) {
    s += fmt::format("{:>12} {:>12} {:>6} {:>12.1f} {:>12.3f} {:>12.3f} {:>8}\n", r.bytes, r.count,
                     dtype, r.time_us, r.algbw_gbs, r.busbw_gbs, r.wrong);
  }
  double sum = 0;
  for (const auto& r : rows) sum += r.busbw_gbs;
  s += fmt::format("# Avg bus bandwidth: {:.3f} GB/s\n", rows.empty() ? 0.0 : sum / rows.size());
  return s;
}

}  // namespace gpulab::bench
