// The external-command reward: its request, its run and the reading of its answer (see
// command_reward.h).
#include "train/rl/command_reward.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

#include "core/files.h"
#include "core/signal_name.h"
#include "core/strings.h"
#include "core/subprocess.h"

namespace gpulab::train::rl {
namespace {

// The last line the command wrote to stderr, short and printable, for a failure's message.
std::string stderr_tail(const std::string& err) {
  const auto lines = split(err, '\n');
  if (lines.empty()) return {};
  std::string last = printable(trim(lines.back()));
  if (last.size() > 200) last = last.substr(0, 200) + "…";
  return ": " + last;
}

// Why a finished run gave no scores at all, or "" when it ran to a clean exit.
std::string run_failure(const ProcessResult& r, std::chrono::milliseconds timeout) {
  if (r.timed_out) return fmt::format("it did not finish within {} ms (killed)", timeout.count());
  if (r.signal != 0) return "it was killed by " + signal_name(r.signal) + stderr_tail(r.err);
  if (r.exit_code != 0)
    return fmt::format("it exited with status {}{}", r.exit_code, stderr_tail(r.err));
  return {};
}

// The scores in a clean run's stdout: one finite number per line, as many lines as samples.
RewardScores read_scores(const std::string& out, size_t n) {
  RewardScores s;
  std::vector<std::string> lines = split(out, '\n', /*skip_empty=*/false);
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the last newline
  if (lines.size() != n) {
    s.values.assign(n, std::nullopt);
    s.failure = fmt::format("it printed {} lines for {} completions", lines.size(), n);
    return s;
  }
  for (size_t i = 0; i < n; ++i) {
    const auto v = parse_double(trim(lines[i]));
    const bool ok = v && std::isfinite(*v);
    if (!ok && s.failure.empty())
      s.failure = fmt::format("line {} ('{}') is not a finite number", i + 1,
                              printable(lines[i].substr(0, 80)));
    s.values.push_back(ok ? v : std::nullopt);
  }
  return s;
}

}  // namespace

Result<CommandReward> CommandReward::create(CommandRewardOptions opts) {
  if (opts.argv.empty() || opts.argv[0].empty())
    return Error(Code::kInvalidArgument, "the reward command is empty",
                 "name a program that reads JSONL on stdin and prints one number per line");
  if (opts.timeout.count() <= 0)
    return Error(Code::kInvalidArgument, "the reward command's timeout must be positive");
  return CommandReward(std::move(opts));
}

std::string CommandReward::name() const {
  return "command " + opts_.argv[0];
}

Status CommandReward::check(const PromptSet&) const {
  const std::string& prog = opts_.argv[0];
  const bool found = prog.find('/') != std::string::npos
                         ? ::access(prog.c_str(), X_OK) == 0 && !std::filesystem::is_directory(prog)
                         : which(prog).has_value();
  if (!found)
    return Error(Code::kNotFound, "the reward command '" + prog + "' is not an executable program",
                 "give its path, or a program on $PATH");
  return ok_status();
}

std::string CommandReward::request(std::span<const RewardSample> samples) {
  std::string in;
  for (const auto& s : samples) {
    Json line = {{"prompt", s.prompt ? s.prompt->prompt : Json()},
                 {"completion", std::string(s.completion)},
                 {"fields", s.prompt ? s.prompt->fields : Json::object()}};
    in += line.dump(-1, ' ', false, Json::error_handler_t::replace);
    in += '\n';
  }
  return in;
}

RewardScores CommandReward::score(std::span<const RewardSample> samples) const {
  if (samples.empty()) return {};
  RunOptions o;
  o.timeout = opts_.timeout;
  o.stdin_data = request(samples);
  auto run = run_process(opts_.argv, o);
  std::string why = run.ok() ? run_failure(*run, opts_.timeout) : run.error().message;
  if (why.empty()) return read_scores(run->out, samples.size());
  RewardScores s;
  s.values.assign(samples.size(), std::nullopt);
  s.failure = why;
  return s;
}

}  // namespace gpulab::train::rl
