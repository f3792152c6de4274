// `gpulab bench`: machine measurements. `bench allreduce` sweeps all-reduce sizes on the DDP
// backend (starting its own ranks with --nproc_per_node); other benches add a sub-subcommand
// here (one add_bench_* function each, registered in add_bench_command).
#include <cstdio>
#include <iostream>
#include <memory>

#include "bench/allreduce.h"
#include "commands.h"
#include "core/json.h"
#include "dist_flags.h"
#include "json_stdout.h"
#include "launch/ports.h"
#include "launch/rank_env.h"
#include "rank_launch.h"
#include "usage.h"

namespace gpulab::cli {

void add_bench_train(CLI::App* bench, CommandContext& ctx);     // bench_train.cpp
void add_bench_parity(CLI::App* bench, CommandContext& ctx);    // bench_parity.cpp
void add_bench_generate(CLI::App* bench, CommandContext& ctx);  // bench_generate.cpp

namespace {

void add_bench_allreduce(CLI::App* bench, CommandContext& ctx) {
  auto o = std::make_shared<bench::AllreduceBenchOptions>();
  auto d = std::make_shared<train::dist::DistOptions>();
  auto json = std::make_shared<bool>(false);
  auto* cmd = bench->add_subcommand(
      "allreduce", "all-reduce bandwidth over message sizes (algbw, busbw as nccl-tests)");
  cmd->add_option("--min_bytes", o->min_bytes, "smallest message")->capture_default_str();
  cmd->add_option("--max_bytes", o->max_bytes, "largest message")->capture_default_str();
  cmd->add_option("--step_factor", o->step_factor, "size multiplier between rows")
      ->check(CLI::Range(2, 1024))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed all-reduces per size")->capture_default_str();
  cmd->add_option("--iters", o->iters, "timed all-reduces per size")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "fp32, fp16, bf16 or fp64")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "fp64"}))
      ->capture_default_str();
  cmd->add_flag("--json", *json, "print the rows as JSON (rank 0)");
  add_dist_flags(cmd, *d, /*training=*/false);
  cmd->callback([cmd, o, d, json, &ctx] {
    throw_usage_error(train::dist::validate(*d), cmd);
    if (auto code = launch_if_needed(*d)) {
      ctx.exit_code = *code;
      return;
    }
    JsonStdout out(*json);
    auto place = launch::detect_rank_place(launch::process_env()).value_or_throw();
    // One rank on its own: a private port, so no fixed port can collide.
    if (!place.distributed()) place.master_port = launch::pick_free_port().value_or_throw();
    train::dist::CommOptions co;
    co.backend = d->backend;
    co.timeout = std::chrono::milliseconds(static_cast<int64_t>(d->timeout_s * 1000));
    co.print_auto = !*json;
    train::dist::Communicator comm(place, co);
    auto rows = bench::run_allreduce_bench(comm, *o);
    int64_t wrong = 0;
    for (const auto& r : rows) wrong += r.wrong;
    if (comm.rank() == 0) {
      if (*json) {
        nlohmann::json j;
        j["backend"] = comm.backend();
        j["ranks"] = comm.size();
        j["dtype"] = o->dtype;
        for (const auto& r : rows) {
          j["rows"].push_back({{"bytes", r.bytes},
                               {"count", r.count},
                               {"time_us", r.time_us},
                               {"algbw_gbs", r.algbw_gbs},
                               {"busbw_gbs", r.busbw_gbs},
                               {"wrong", r.wrong}});
        }
        out.emit(j.dump(2));
      } else {
        std::cout << "# backend " << comm.backend() << ", device " << comm.device().str() << "\n"
                  << bench::format_allreduce_table(rows, o->dtype, comm.size());
        if (comm.size() == 1)
          std::cout << "# one rank: bus bandwidth is 0 by definition; use --nproc_per_node N\n";
      }
    }
    if (wrong > 0) {
      std::fprintf(stderr, "error: %lld elements of the all-reduce check were wrong\n",
                   static_cast<long long>(wrong));
      ctx.exit_code = 1;
    }
  });
}

}  // namespace

void add_bench_command(CLI::App& app, CommandContext& ctx) {
  auto* bench = app.add_subcommand("bench",
                                   "measure the machine: all-reduce bandwidth, training and "
                                   "generation throughput, device parity");
  bench->require_subcommand(1);
  add_bench_allreduce(bench, ctx);
  add_bench_train(bench, ctx);
  add_bench_parity(bench, ctx);
  add_bench_generate(bench, ctx);
}

}  // namespace gpulab::cli
