// Reading a Slurm job step from the environment and laying out its ranks.
#include "launch/slurm_step.h"

#include <charconv>

#include "launch/slurm_hostlist.h"

namespace gpulab::launch {

namespace {

Result<std::optional<long long>> get_num(const EnvLookup& env, const std::string& name) {
  auto v = env(name);
  if (!v) return std::optional<long long>{};
  long long out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size() || out < 0)
    return Error{Code::kInvalidArgument, name + "='" + *v + "' is not a number",
                 "this variable comes from Slurm; unset it if you set it by hand"};
  return std::optional<long long>{out};
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t e = s.find(sep, pos);
    std::string item = s.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
    if (!item.empty()) out.push_back(item);
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  return out;
}

}  // namespace

int SlurmStep::tasks_on_this_node() const {
  if (nodeid >= 0 && nodeid < static_cast<int>(tasks_per_node.size()))
    return tasks_per_node[nodeid];
  return 1;
}

Result<std::vector<int>> parse_tasks_per_node(const std::string& text) {
  std::vector<int> out;
  for (const auto& item : split(text, ',')) {
    int count = 0, times = 1;
    auto bad = [&] {
      return Error{Code::kInvalidArgument,
                   "tasks per node '" + text + "' is not in Slurm's form (e.g. 2(x3),1)"};
    };
    auto open = item.find('(');
    std::string n = item.substr(0, open);
    auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
    if (ec != std::errc() || p != n.data() + n.size() || count < 0) return bad();
    if (open != std::string::npos) {
      if (item.size() < open + 4 || item.compare(open, 2, "(x") != 0 || item.back() != ')')
        return bad();
      std::string t = item.substr(open + 2, item.size() - open - 3);
      auto [q, ec2] = std::from_chars(t.data(), t.data() + t.size(), times);
      if (ec2 != std::errc() || q != t.data() + t.size() || times < 1 || times > 100000)
        return bad();
    }
    out.insert(out.end(), times, count);
  }
  return out;
}

int slurm_master_port(long long job_id, long long step_id) {
  // Above the usual ephemeral-free band, below Linux's ephemeral range (32768).
  return 20000 + static_cast<int>((job_id * 7 + step_id) % 12000);
}

Result<std::optional<SlurmStep>> read_slurm_step(const EnvLookup& env) {
  auto procid = get_num(env, "SLURM_PROCID");
  if (!procid.ok()) return procid.error();
  if (!*procid) return std::optional<SlurmStep>{};
#define GPULAB_NUM(var, name)                \
  auto var##_r = get_num(env, name);         \
  if (!var##_r.ok()) return var##_r.error(); \
  std::optional<long long> var = *var##_r;
  GPULAB_NUM(step_id, "SLURM_STEP_ID");
  GPULAB_NUM(job_id, "SLURM_JOB_ID");
  GPULAB_NUM(step_tasks, "SLURM_STEP_NUM_TASKS");
  GPULAB_NUM(ntasks, "SLURM_NTASKS");
  GPULAB_NUM(localid, "SLURM_LOCALID");
  GPULAB_NUM(nodeid, "SLURM_NODEID");
  GPULAB_NUM(restarts, "SLURM_RESTART_COUNT");
#undef GPULAB_NUM
  // The batch script itself (no srun) is no step: there this process is one program on the
  // first node (it may start its own local ranks), not rank 0 of the job's tasks.
  if (!step_id) return std::optional<SlurmStep>{};
  SlurmStep s;
  s.job_id = job_id.value_or(0);
  s.step_id = *step_id;
  s.procid = static_cast<int>(**procid);
  s.ntasks = static_cast<int>(step_tasks.value_or(ntasks.value_or(1)));
  s.localid = static_cast<int>(localid.value_or(0));
  s.nodeid = static_cast<int>(nodeid.value_or(0));
  s.restart_count = static_cast<int>(restarts.value_or(0));
  s.node_name = env("SLURMD_NODENAME").value_or("");
  std::string list =
      env("SLURM_STEP_NODELIST")
          .value_or(env("SLURM_JOB_NODELIST").value_or(env("SLURM_NODELIST").value_or("")));
  if (list.empty()) {
    s.nodes = {s.node_name.empty() ? std::string("127.0.0.1") : s.node_name};
  } else {
    auto hosts = expand_hostlist(list);
    if (!hosts.ok()) return hosts.error();
    s.nodes = std::move(*hosts);
  }
  std::string tpn =
      env("SLURM_STEP_TASKS_PER_NODE").value_or(env("SLURM_TASKS_PER_NODE").value_or(""));
  if (!tpn.empty()) {
    auto t = parse_tasks_per_node(tpn);
    if (!t.ok()) return t.error();
    s.tasks_per_node = std::move(*t);
  }
  if (s.tasks_per_node.size() != s.nodes.size()) {
    // Unknown or inconsistent: assume an even spread (what --ntasks-per-node gives).
    s.tasks_per_node.assign(s.nodes.size(), std::max(1, s.ntasks / std::max(1, s.nnodes())));
  }
  for (const char* name :
       {"SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"}) {
    if (auto v = env(name); v && !v->empty()) {
      s.gpus = split(*v, ',');
      break;
    }
  }
  if (s.procid >= s.ntasks || s.nodeid >= s.nnodes())
    return Error{Code::kInvalidArgument,
                 "Slurm task " + std::to_string(s.procid) + " on node index " +
                     std::to_string(s.nodeid) + " does not fit a step of " +
                     std::to_string(s.ntasks) + " tasks on " + std::to_string(s.nnodes()) +
                     " nodes",
                 "SLURM_* variables from different steps are mixed; start the step with srun"};
  return std::optional<SlurmStep>{std::move(s)};
}

Result<SlurmPlan> plan_slurm(const SlurmStep& step, int requested) {
  SlurmPlan p;
  p.master_addr = step.first_node();
  p.master_port = slurm_master_port(step.job_id, step.step_id);
  p.nnodes = step.nnodes();
  p.node_rank = step.nodeid;
  const int here = step.tasks_on_this_node();
  if (here > 1) {
    if (requested > 1)
      return Error{Code::kInvalidArgument,
                   "srun started " + std::to_string(here) + " tasks on " +
                       (step.node_name.empty() ? "this node" : step.node_name) +
                       " and --nproc_per_node " + std::to_string(requested) +
                       " asks each of them to start more ranks",
                   "either one task per rank (srun --ntasks-per-node=N, no --nproc_per_node) or "
                   "one task per node (srun --ntasks-per-node=1 --nproc_per_node N)"};
    p.nproc_per_node = here;
    p.world_size = step.ntasks;
    return p;
  }
  int local = requested > 1 ? requested : static_cast<int>(step.gpus.size());
  if (local <= 1 || step.ntasks != step.nnodes()) {
    p.nproc_per_node = 1;
    p.world_size = step.ntasks;
    return p;
  }
  p.launcher_per_node = true;
  p.nproc_per_node = local;
  p.world_size = local * step.nnodes();
  return p;
}

std::string SlurmPlan::describe() const {
  return std::to_string(world_size) + " rank(s), " + std::to_string(nproc_per_node) +
         " on each of " + std::to_string(nnodes) + " node(s) (" +
         (launcher_per_node ? "one task per node starts them" : "one task per rank") +
         "), rendezvous on " + master_addr + ":" + std::to_string(master_port);
}

}  // namespace gpulab::launch
