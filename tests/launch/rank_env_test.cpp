// Rank detection from each launcher's environment (torchrun/gpulab, Slurm, OpenMPI, PyTorchJob).
#include <gtest/gtest.h>

#include <map>

#include "env_of.h"
#include "launch/rank_env.h"
#include "launch/slurm_step.h"

using namespace gpulab;
using namespace gpulab::launch;

using gpulab::launch::testing::env_of;

TEST(RankEnv, NoLauncherIsSingleProcess) {
  auto p = detect_rank_place(env_of({}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->source, "single");
  EXPECT_EQ(p->world_size, 1);
  EXPECT_FALSE(p->distributed());
}

TEST(RankEnv, GpulabLaunchVariables) {
  auto p = detect_rank_place(env_of({{"RANK", "3"},
                                     {"LOCAL_RANK", "1"},
                                     {"WORLD_SIZE", "4"},
                                     {"LOCAL_WORLD_SIZE", "2"},
                                     {"GROUP_RANK", "1"},
                                     {"MASTER_ADDR", "10.200.0.1"},
                                     {"MASTER_PORT", "29511"},
                                     {"GPULAB_LAUNCHER", "1"},
                                     {"GPULAB_RESTART_COUNT", "1"}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->source, "gpulab");
  EXPECT_EQ(p->rank, 3);
  EXPECT_EQ(p->local_rank, 1);
  EXPECT_EQ(p->node_rank, 1);
  EXPECT_EQ(p->master_addr, "10.200.0.1");
  EXPECT_EQ(p->master_port, 29511);
  EXPECT_EQ(p->restart_count, 1);
}

TEST(RankEnv, Torchrun) {
  auto p = detect_rank_place(env_of({{"RANK", "1"},
                                     {"LOCAL_RANK", "1"},
                                     {"WORLD_SIZE", "2"},
                                     {"LOCAL_WORLD_SIZE", "2"},
                                     {"GROUP_RANK", "0"},
                                     {"TORCHELASTIC_RUN_ID", "none"},
                                     {"TORCHELASTIC_RESTART_COUNT", "2"}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->source, "torchrun");
  EXPECT_EQ(p->master_addr, "127.0.0.1");
  EXPECT_EQ(p->master_port, 29500);
  EXPECT_EQ(p->restart_count, 2);
}

TEST(RankEnv, PyTorchJobPodWithoutTorchrun) {
  auto p = detect_rank_place(env_of({{"RANK", "2"},
                                     {"WORLD_SIZE", "4"},
                                     {"MASTER_ADDR", "job-master-0"},
                                     {"MASTER_PORT", "23456"},
                                     {"PYTORCHJOB_NAME", "job"}}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->source, "pytorchjob");
  EXPECT_EQ(p->rank, 2);
  EXPECT_EQ(p->local_rank, 0);
  EXPECT_EQ(p->local_world_size, 1);
  EXPECT_EQ(p->node_rank, 2);
  EXPECT_EQ(p->master_addr, "job-master-0");
}

TEST(RankEnv, Slurm) {
  auto p = detect_rank_place(env_of({{"SLURM_PROCID", "5"},
                                     {"SLURM_STEP_ID", "0"},
                                     {"SLURM_STEP_NODELIST", "gpu[07-08]"},
                                     {"SLURM_LOCALID", "1"},
                                     {"SLURM_NTASKS", "8"},
                                     {"SLURM_NNODES", "2"},
                                     {"SLURM_NODEID", "1"},
                                     {"SLURM_JOB_ID", "123456"},
                                     {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->source, "slurm");
  EXPECT_EQ(p->rank, 5);
  EXPECT_EQ(p->local_rank, 1);
  EXPECT_EQ(p->world_size, 8);
  EXPECT_EQ(p->local_world_size, 4);
  EXPECT_EQ(p->node_rank, 1);
  EXPECT_EQ(p->master_addr, "gpu07");
  EXPECT_EQ(p->master_port, slurm_master_port(123456, 0));
}

// The batch script of a multi-task job is no step: one process, not rank 0 of 8 waiting for
// peers that never come.
TEST(RankEnv, SlurmBatchScriptIsOneProcess) {
  auto p = detect_rank_place(env_of({{"SLURM_PROCID", "0"},
                                     {"SLURM_NTASKS", "8"},
                                     {"SLURM_JOB_ID", "7"},
                                     {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                                     {"SLURM_RESTART_COUNT", "1"}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->source, "single");
  EXPECT_EQ(p->world_size, 1);
  EXPECT_EQ(p->restart_count, 1);  // a requeued job resumes
}

TEST(RankEnv, SlurmNodeListForms) {
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("gpu[03-05,07]"), "gpu03");
  EXPECT_EQ(first_slurm_host("a[1,3],b[2-4]"), "a1");
}

TEST(RankEnv, OpenMpi) {
  auto p = detect_rank_place(env_of({{"OMPI_COMM_WORLD_RANK", "2"},
                                     {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                     {"OMPI_COMM_WORLD_NODE_RANK", "1"},
                                     {"MASTER_ADDR", "host0"}}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->source, "openmpi");
  EXPECT_EQ(p->rank, 2);
  EXPECT_EQ(p->node_rank, 1);
  EXPECT_EQ(p->master_addr, "host0");
}

TEST(RankEnv, OpenMpiAcrossNodesNeedsMasterAddr) {
  auto p = detect_rank_place(env_of({{"OMPI_COMM_WORLD_RANK", "0"},
                                     {"OMPI_COMM_WORLD_SIZE", "4"},
                                     {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                     {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("MASTER_ADDR"), std::string::npos);
}

TEST(RankEnv, BadValuesNameTheVariable) {
  auto p = detect_rank_place(env_of({{"RANK", "x"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Code::kInvalidArgument);
  EXPECT_NE(p.error().message.find("RANK"), std::string::npos);
  auto q = detect_rank_place(env_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}}));
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message.find("outside world size"), std::string::npos);
}
