// Slurm host lists, tasks-per-node strings and the rank layout of a job step, on the variables
// a real srun sets (captured on the test cluster of tests/integration/slurm).
#include <gtest/gtest.h>

#include <map>

#include "env_of.h"
#include "launch/peer_table.h"
#include "launch/slurm_hostlist.h"
#include "launch/slurm_step.h"

using namespace gpulab;
using namespace gpulab::launch;

namespace {

using Hosts = std::vector<std::string>;

using gpulab::launch::testing::env_of;

// What srun -N2 --ntasks-per-node=2 --gres=gpu:2 set in task 3 on the test cluster.
std::map<std::string, std::string> task3() {
  return {{"SLURM_PROCID", "3"},
          {"SLURM_LOCALID", "1"},
          {"SLURM_NODEID", "1"},
          {"SLURM_NTASKS", "4"},
          {"SLURM_STEP_NUM_TASKS", "4"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_JOB_ID", "12"},
          {"SLURM_STEP_NODELIST", "node[1-2]"},
          {"SLURM_JOB_NODELIST", "node[1-2]"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
          {"SLURMD_NODENAME", "node2"},
          {"SLURM_GPUS_ON_NODE", "2"}};
}

}  // namespace

TEST(SlurmHostlist, Expands) {
  EXPECT_EQ(*expand_hostlist("node1"), Hosts({"node1"}));
  EXPECT_EQ(*expand_hostlist("node[1-2]"), Hosts({"node1", "node2"}));
  EXPECT_EQ(*expand_hostlist("gpu[08-10,12],login1"),
            Hosts({"gpu08", "gpu09", "gpu10", "gpu12", "login1"}));
  EXPECT_EQ(*expand_hostlist("r[1-2]n[1-2]"), Hosts({"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(*expand_hostlist("a-[1,3]-x,b"), Hosts({"a-1-x", "a-3-x", "b"}));
}

TEST(SlurmHostlist, RejectsMalformed) {
  for (const char* bad :
       {"node[1-2", "node1-2]", "node[2-1]", "node[a-b]", "node[]", "", ",", "n[[1]]", "n[1-]"}) {
    auto r = expand_hostlist(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("is not valid"), std::string::npos) << bad;
    }
  }
}

TEST(SlurmHostlist, CompressesBack) {
  EXPECT_EQ(compress_hostlist({"node1", "node2", "node3", "node5"}), "node[1-3,5]");
  EXPECT_EQ(compress_hostlist({"gpu08", "gpu09", "login", "gpu11"}), "gpu[08-09,11],login");
  EXPECT_EQ(compress_hostlist({"node2"}), "node2");
  for (const char* list : {"gpu[08-10,12],login1", "node[1-2]"})
    EXPECT_EQ(*expand_hostlist(compress_hostlist(*expand_hostlist(list))), *expand_hostlist(list));
}

TEST(SlurmTasksPerNode, Parses) {
  EXPECT_EQ(*parse_tasks_per_node("2(x2)"), std::vector<int>({2, 2}));
  EXPECT_EQ(*parse_tasks_per_node("4(x2),1"), std::vector<int>({4, 4, 1}));
  EXPECT_EQ(*parse_tasks_per_node("3"), std::vector<int>({3}));
  for (const char* bad : {"x", "2(x)", "2(2)", "2(x0)", "-1"})
    EXPECT_FALSE(parse_tasks_per_node(bad).ok()) << bad;
}

TEST(SlurmStep, ReadsATask) {
  auto s = read_slurm_step(env_of(task3()));
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_TRUE(s->has_value());
  const SlurmStep& st = **s;
  EXPECT_EQ(st.procid, 3);
  EXPECT_EQ(st.nodes, Hosts({"node1", "node2"}));
  EXPECT_EQ(st.tasks_on_this_node(), 2);
  EXPECT_EQ(st.first_node(), "node1");
  EXPECT_EQ(st.node_name, "node2");
}

TEST(SlurmStep, NoStepOutsideSrun) {
  EXPECT_FALSE(read_slurm_step(env_of({}))->has_value());
  // The batch script: SLURM_PROCID=0 but no SLURM_STEP_ID.
  EXPECT_FALSE(
      read_slurm_step(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}}))->has_value());
  auto bad = task3();
  bad["SLURM_NODEID"] = "5";
  EXPECT_FALSE(read_slurm_step(env_of(bad)).ok());
  bad = task3();
  bad["SLURM_STEP_NODELIST"] = "node[1-";
  EXPECT_FALSE(read_slurm_step(env_of(bad)).ok());
}

TEST(SlurmPlan, OneRankPerTask) {
  auto st = **read_slurm_step(env_of(task3()));
  auto p = plan_slurm(st, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->launcher_per_node);
  EXPECT_EQ(p->world_size, 4);
  EXPECT_EQ(p->nproc_per_node, 2);
  EXPECT_EQ(p->master_addr, "node1");
  EXPECT_EQ(p->master_port, slurm_master_port(12, 0));
  // Several tasks per node that would each start several ranks: refused, with both fixes.
  auto twice = plan_slurm(st, 2);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("srun started 2 tasks on node2"), std::string::npos);
  EXPECT_NE(twice.error().hint.find("--ntasks-per-node=1"), std::string::npos);
}

TEST(SlurmPlan, OneTaskPerNodeStartsARankPerGpu) {
  auto env = task3();
  env["SLURM_PROCID"] = "1";
  env["SLURM_LOCALID"] = "0";
  env["SLURM_NTASKS"] = env["SLURM_STEP_NUM_TASKS"] = "2";
  env["SLURM_STEP_TASKS_PER_NODE"] = "1(x2)";
  env["SLURM_STEP_GPUS"] = "0,1,2,3";
  auto st = **read_slurm_step(env_of(env));
  auto p = plan_slurm(st, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->launcher_per_node);
  EXPECT_EQ(p->nproc_per_node, 4);
  EXPECT_EQ(p->world_size, 8);
  EXPECT_EQ(p->node_rank, 1);
  // --nproc_per_node wins over the GPU count (CPU ranks).
  EXPECT_EQ(plan_slurm(st, 3)->world_size, 6);
  // One GPU (or none) per task: the task is the rank.
  env["SLURM_STEP_GPUS"] = "1";
  EXPECT_FALSE(plan_slurm(**read_slurm_step(env_of(env)), 1)->launcher_per_node);
}

TEST(SlurmPlan, PortsDifferBetweenStepsAndJobs) {
  EXPECT_NE(slurm_master_port(12, 0), slurm_master_port(12, 1));
  EXPECT_NE(slurm_master_port(12, 0), slurm_master_port(13, 0));
  for (long long j : {0LL, 1LL, 999999999LL}) {
    EXPECT_GE(slurm_master_port(j, 0), 20000);
    EXPECT_LT(slurm_master_port(j, 3), 32768);
  }
}

TEST(PeerTable, NamesTheLostPeer) {
  PeerTable t;
  t.set(0, PeerTable::record("node1", "10.9.0.2"));
  t.set(1, PeerTable::record("node1", "10.9.0.2"));
  t.set(2, PeerTable::record("node2", "10.9.0.3"));
  t.set(3, PeerTable::record("node2", "10.9.0.3"));
  EXPECT_EQ(t.host_of(2), "node2");
  EXPECT_EQ(t.host_of(9), "");
  // Gloo's words when a peer's process dies.
  EXPECT_EQ(t.explain("[/usr/include/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                      "[10.9.0.3]:38214"),
            "; peer 10.9.0.3 is node2 (ranks 2-3)");
  EXPECT_EQ(t.explain("Connection reset by peer 10.9.0.2:5 and 10.9.0.2:6"),
            "; peer 10.9.0.2 is node1 (ranks 0-1)");
  // Rank 0 lost rank 1 on its own host: itself is left out.
  EXPECT_EQ(t.explain("Connection closed by peer [10.9.0.2]:33921", 0),
            "; peer 10.9.0.2 is node1 (rank 1)");
  EXPECT_EQ(t.explain("Timed out waiting 300000ms"), "");
  EXPECT_EQ(t.explain("from 192.168.1.1"), "");
  t.set(5, PeerTable::record("node3", "10.9.0.4"));
  EXPECT_EQ(t.explain("10.9.0.4"), "; peer 10.9.0.4 is node3 (rank 5)");
}
