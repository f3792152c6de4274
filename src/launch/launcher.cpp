// run_launch: builds each rank's environment, runs attempts of the rank group, reports the
// failing rank, and restarts the group (up to max_restarts) after a failure.
#include "launch/launcher.h"

#include <fmt/format.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/signal_name.h"
#include "launch/heartbeat.h"
#include "launch/ports.h"
#include "launch/rank_cgroup.h"
#include "launch/rank_env.h"
#include "launch/rank_group.h"

namespace gpulab::launch {

namespace {

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int sig) {
  g_stop_signal = sig;
}

// Installs SIGINT/SIGTERM/SIGHUP handlers and blocks SIGCHLD for sigtimedwait; restores both.
class SignalScope {
 public:
  SignalScope() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &chld, &old_mask_);
  }
  ~SignalScope() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3]{};
  sigset_t old_mask_{};
};

void say(const LaunchOptions& o, const std::string& line) {
  if (o.verbose) std::fprintf(stderr, "gpulab launch: %s\n", line.c_str());
}

Status validate(const LaunchOptions& o) {
  auto bad = [](std::string m, std::string h = {}) {
    return Error{Code::kInvalidArgument, std::move(m), std::move(h)};
  };
  if (o.command.empty()) return bad("no command given", "put the command after --");
  if (o.nproc_per_node < 1) return bad("--nproc_per_node must be at least 1");
  if (o.nnodes < 1) return bad("--nnodes must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return bad("--node_rank " + std::to_string(o.node_rank) + " is outside 0.." +
               std::to_string(o.nnodes - 1));
  }
  if (o.nnodes > 1 && o.master_addr.empty()) {
    return bad("a job on several nodes needs --master_addr", "pass the address of node 0");
  }
  if (o.master_port < 0 || o.master_port > 65535) return bad("--master_port is out of range");
  if (o.max_restarts < 0) return bad("--max_restarts must not be negative");
  return ok_status();
}

// A private folder for the ranks' error files, removed when the launch ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpulab-launch-XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::vector<std::string> self_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  // argv[0] may be relative or found on $PATH; the running binary is always /proc/self/exe.
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!args.empty() && !ec) args[0] = exe.string();
  return args;
}

namespace {

// The launcher got SIGINT/SIGTERM/SIGHUP: pass it on, then stop the ranks (--stop_grace).
LaunchResult stop_for_signal(const LaunchOptions& o, RankGroup& group, LaunchResult result) {
  const int sig = g_stop_signal;
  say(o, "got " + signal_name(sig) + ", stopping the ranks");
  // A rank in a long step (a first step, a loaded machine) may not reach its stop in time: say
  // so, or its missing "Stopped by" line and checkpoint look like a silent failure.
  if (const int killed = group.stop(o.stop_grace, sig); killed > 0)
    say(o, fmt::format("{} rank(s) still running after --stop_grace {:g} s, killed (SIGKILL); "
                       "raise --stop_grace to let a rank finish its step",
                       killed, static_cast<double>(o.stop_grace.count()) / 1000.0));
  result.exit_code = 128 + sig;
  result.stopped_by_signal = true;
  result.message = "stopped by " + signal_name(sig);
  return result;
}

// Bad input every rank shares, said by the rank itself: stop the others, no restart, and the
// rank's own lines as the message ("error: " left to the caller: "...\nhint: ...").
LaunchResult stop_for_bad_input(const LaunchOptions& o, RankGroup& group, const RankFailure& f,
                                LaunchResult result) {
  group.stop(o.stop_grace);
  result.failure = f;
  result.exit_code = 2;
  result.message = f.error.substr(std::string("error: ").size());
  return result;
}

}  // namespace

namespace {

// Each rank's peak memory, read from its cgroup once an attempt is over.
void record_peaks(const LaunchOptions& o, const RankCgroups* cgroups, LaunchResult& r,
                  const std::vector<RankSpec>& specs) {
  if (cgroups == nullptr) return;
  r.rank_peak_bytes.clear();
  std::string line;
  for (const RankSpec& s : specs) {
    auto peak = cgroups->peak_bytes(s.rank);
    if (!peak) continue;
    r.rank_peak_bytes[s.rank] = *peak;
    line +=
        (line.empty() ? "" : ", ") + ("rank " + std::to_string(s.rank) + " ") + format_mib(*peak);
  }
  if (!line.empty())
    say(o, "peak memory per rank (cgroup): " + line + " (cap " +
               format_mib(o.rank_memory_max_bytes) + ")");
}

// What every attempt's ranks share: world, rendezvous address, threads per rank.
struct LaunchPlan {
  int world = 1;
  std::string addr;
  int threads = 1;
  bool user_omp = false;
};

// The ranks of this node for one attempt: their environment, error and heartbeat files, cgroups.
Result<std::vector<RankSpec>> rank_specs(const LaunchOptions& o, const LaunchPlan& plan, int port,
                                         int attempt, const TempDir& tmp, RankCgroups* cgroups) {
  std::vector<RankSpec> specs;
  for (int local = 0; local < o.nproc_per_node; ++local) {
    RankSpec s;
    s.local_rank = local;
    s.rank = o.node_rank * o.nproc_per_node + local;
    s.env = o.env;
    s.env["RANK"] = std::to_string(s.rank);
    s.env["LOCAL_RANK"] = std::to_string(local);
    s.env["WORLD_SIZE"] = std::to_string(plan.world);
    s.env["LOCAL_WORLD_SIZE"] = std::to_string(o.nproc_per_node);
    s.env["GROUP_RANK"] = std::to_string(o.node_rank);
    s.env["MASTER_ADDR"] = plan.addr;
    s.env["MASTER_PORT"] = std::to_string(port);
    s.env[kEnvLauncher] = "1";
    s.env[kEnvRestartCount] = std::to_string(attempt);
    s.env[kEnvNumThreads] = std::to_string(plan.threads);
    if (!plan.user_omp) s.env["OMP_NUM_THREADS"] = std::to_string(plan.threads);
    if (!tmp.path.empty()) {
      s.error_file = (tmp.path / ("rank" + std::to_string(s.rank) + ".err")).string();
      s.env[kEnvErrorFile] = s.error_file;
      // Always: a rank stopped by a signal is reported with its last progress too.
      s.heartbeat_file = (tmp.path / ("rank" + std::to_string(s.rank) + ".beat")).string();
      s.env[kEnvHeartbeatFile] = s.heartbeat_file;
    }
    if (cgroups != nullptr) {
      auto procs = cgroups->prepare(s.rank);
      if (!procs.ok()) return procs.error();
      s.cgroup_procs = *procs;
    }
    specs.push_back(std::move(s));
  }
  return specs;
}

// A rank whose cgroup met the OOM killer (the rank or a process it started) failed for lack of
// memory: that is the cause to act on, said with the rank and the cap.
void blame_oom(const LaunchOptions& o, const RankCgroups* cgroups,
               const std::vector<RankSpec>& specs, RankFailure& failure) {
  if (cgroups == nullptr) return;
  for (const RankSpec& s : specs) {
    if (cgroups->oom_kills(s.rank) == 0) continue;
    if (s.rank == failure.rank)
      failure.oom_cap_bytes = o.rank_memory_max_bytes;
    else
      say(o, "rank " + std::to_string(s.rank) + " ran out of memory: the kernel's OOM killer " +
                 "acted at its --rank_memory_max cap of " + format_mib(o.rank_memory_max_bytes));
  }
}

// A failed rank ends the attempt: the others are stopped and the result carries its exit code.
void end_attempt(const LaunchOptions& o, RankGroup& group, const RankFailure& failure,
                 LaunchResult& result) {
  auto t0 = std::chrono::steady_clock::now();
  say(o, failure.describe() + "; stopping the other ranks");
  group.stop(o.stop_grace);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", secs);
  say(o, std::string("all ranks stopped in ") + buf + " s");
  result.failure = failure;
  result.message = failure.describe();
  if (failure.signal || failure.stopped_by) {
    result.exit_code = 128 + (failure.signal ? failure.signal : failure.stopped_by);
  } else if (failure.silent_s > 0) {
    result.exit_code = 124;  // timeout(1)'s code for "ran too long"
  } else {
    result.exit_code = failure.exit_code;
  }
}

}  // namespace

Result<LaunchResult> run_launch(const LaunchOptions& o) {
  if (auto s = validate(o); !s.ok()) return s.error();
  LaunchPlan plan;
  plan.world = o.nproc_per_node * o.nnodes;
  plan.addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
  plan.threads = o.threads_per_rank;
  if (plan.threads <= 0) plan.threads = std::max(1, available_cores() / o.nproc_per_node);
  plan.user_omp = std::getenv("OMP_NUM_THREADS") != nullptr;
  // Before any rank starts: a cap that cannot be enforced fails the launch, not a rank.
  std::unique_ptr<RankCgroups> cgroups;
  if (o.rank_memory_max_bytes > 0) {
    auto cg = RankCgroups::create(o.rank_memory_max_bytes);
    if (!cg.ok()) return cg.error();
    cgroups = std::move(*cg);
  }

  TempDir tmp;
  SignalScope signals;
  LaunchResult result;
  for (int attempt = 0;; ++attempt) {
    int port = o.master_port;
    if (port == 0) {
      if (o.nnodes > 1) {
        port = 29500;
      } else {
        auto p = pick_free_port(plan.addr);
        if (!p.ok()) return p.error();
        port = *p;
      }
    }
    auto specs = rank_specs(o, plan, port, attempt, tmp, cgroups.get());
    if (!specs.ok()) return specs.error();
    if (attempt == 0) {
      say(o, "starting " + std::to_string(o.nproc_per_node) + " rank(s) on node " +
                 std::to_string(o.node_rank) + " of " + std::to_string(o.nnodes) + " (world size " +
                 std::to_string(plan.world) + ", master " + plan.addr + ":" + std::to_string(port) +
                 ", " + std::to_string(plan.threads) + " thread(s) per rank)");
      if (cgroups)
        say(o, "each rank capped at " + format_mib(o.rank_memory_max_bytes) + " of memory (" +
                   cgroups->describe() + ")");
    }

    RankGroup group;
    if (auto s = group.start(o.command, *specs); !s.ok()) return s.error();
    std::optional<RankFailure> failure;
    while (!group.done() && !failure && g_stop_signal == 0) {
      failure = group.poll(std::chrono::milliseconds(100));
      if (!failure) failure = group.check_progress(o.hang);
    }
    if (g_stop_signal != 0) return stop_for_signal(o, group, std::move(result));
    if (!failure) {
      record_peaks(o, cgroups.get(), result, *specs);
      result.exit_code = 0;
      result.failure.reset();
      result.message.clear();
      return result;
    }
    if (failure->reported_bad_input())
      return stop_for_bad_input(o, group, *failure, std::move(result));
    blame_oom(o, cgroups.get(), *specs, *failure);
    end_attempt(o, group, *failure, result);
    record_peaks(o, cgroups.get(), result, *specs);
    if (attempt >= o.max_restarts) return result;
    result.restarts = attempt + 1;
    say(o, "restarting the group (restart " + std::to_string(attempt + 1) + " of " +
               std::to_string(o.max_restarts) + ")");
  }
}

}  // namespace gpulab::launch
