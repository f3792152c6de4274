// `gpulab bench generate`: greedy generation tokens/s of a decoder loaded from a Hugging Face
// folder (config.json + model.safetensors), the job bench/compare times against transformers'
// `generate` on the same folder (bench::run_generate_bench); with --prompt_lengths, GRPO's batch
// (bench::run_rollout_bench).
#include <memory>
#include <string>

#include <fmt/format.h>

#include "bench/generate_bench.h"
#include "bench/trace_summary.h"
#include "commands.h"
#include "core/json.h"
#include "json_stdout.h"
#include "profile_validator.h"
#include "train/device.h"
#include "train/run_files.h"
#include "train_flags.h"

namespace gpulab::cli {
namespace {

struct GenerateBenchArgs {
  std::string dir, device = "cpu";
  int threads = 0;
  bool json = false;
  bench::GenerateBenchOptions o;
};

// The result as JSON; with --profile, the trace's heaviest ops too (and, without --json, their
// table on stderr, where a reader sees it above the JSON).
void emit(JsonStdout& out, const GenerateBenchArgs& a, nlohmann::json j, const Json& top) {
  if (!a.o.profile.empty()) {
    j["profile_file"] = a.o.profile;
    j["profile_top"] = top;
    if (!a.json) fmt::print(stderr, "{}", bench::trace_table(a.o.profile, top));
  }
  out.emit(a.json ? j.dump() : j.dump(2));
}

void run_bench_generate(const GenerateBenchArgs& a) {
  if (a.threads > 0) torch::set_num_threads(a.threads);
  // A Hugging Face folder or a run folder, read as `gpulab generate --model DIR` reads it.
  auto loaded = train::load_decoder(a.dir, "").value_or_throw();
  const auto& cfg = loaded.config;
  auto model = train::build_loaded_decoder(loaded, train::resolve_device(a.device, 0));
  JsonStdout out(a.json);
  if (!a.o.prompt_lengths.empty()) {
    const auto r = bench::run_rollout_bench(*model, a.o);
    nlohmann::json j{{"model", cfg.name},
                     {"prompt_lengths", a.o.prompt_lengths},
                     {"group", a.o.group},
                     {"new_tokens", a.o.new_tokens},
                     {"seconds", r.seconds},
                     {"tokens_per_second", r.tokens_per_second},
                     {"per_prompt_seconds", r.per_prompt_seconds},
                     {"per_prompt_tokens_per_second", r.per_prompt_tokens_per_second},
                     {"same_tokens_per_prompt", r.same_tokens},
                     {"tokens", r.tokens}};
    emit(out, a, j, r.profile_top);
    return;
  }
  const auto r = bench::run_generate_bench(*model, a.o);
  nlohmann::json j{{"model", cfg.name},
                   {"prompt_tokens", a.o.prompt_tokens},
                   {"new_tokens", a.o.new_tokens},
                   {"seconds", r.seconds},
                   {"tokens_per_second", r.tokens_per_second},
                   {"tokens", r.tokens}};
  emit(out, a, j, r.profile_top);
}

}  // namespace

void add_bench_generate(CLI::App* bench, CommandContext& /*ctx*/) {
  auto a = std::make_shared<GenerateBenchArgs>();
  auto* cmd = bench->add_subcommand(
      "generate", "greedy generation tokens/s of a Hugging Face folder's decoder (KV cache)");
  cmd->add_option("--weights", a->dir,
                  "a Hugging Face folder (config.json, model.safetensors) or a gpulab run folder")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--prompt_tokens", a->o.prompt_tokens, "prompt length")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--new_tokens", a->o.new_tokens, "tokens generated per run")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--prompt_lengths", a->o.prompt_lengths,
                  "rollout mode: one prompt of each length (comma-separated), x --group rows, "
                  "through generate_groups and through generate_rows once per prompt")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--group", a->o.group, "rollout mode: rows per prompt (GRPO's group)")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--warmup", a->o.warmup, "untimed runs first")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  cmd->add_option("--reps", a->o.reps, "timed runs (the median is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  cmd->add_option("--threads", a->threads, "intra-op threads (0: libtorch's default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--profile", a->o.profile,
                  "write a Chrome trace of the timed runs here (libtorch's Kineto profiler, a "
                  "GPU's kernels too; in rollout "
                  "mode, generate_groups' runs) and print the heaviest ops")
      ->check(profile_validator());
  add_shared_flag(cmd, "device", a->device);
  cmd->add_flag("--json", a->json, "print one JSON line");
  cmd->callback([a] { run_bench_generate(*a); });
}

}  // namespace gpulab::cli
