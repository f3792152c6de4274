// The sbatch script gpulab writes from the seed-style request, the container choice, and the
// refusals of bad requests (each names the field and what to pass).
#include <gtest/gtest.h>

#include "launch/slurm_script.h"

using namespace gpulab;
using namespace gpulab::launch;

namespace {

SlurmJobRequest two_nodes() {
  SlurmJobRequest r;
  r.gpus_per_node = 4;
  r.nodes = 2;
  r.partition = "gpu";
  r.time_limit = "02:00:00";
  r.train_flags = "--model resnet50 --dataset cifar10 --note 'two words'";
  return r;
}

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

}  // namespace

TEST(SlurmScript, GpuJob) {
  auto s = render_sbatch_script(two_nodes());
  ASSERT_TRUE(s.ok()) << s.error().message;
  for (const char* line :
       {"#!/bin/bash\n", "#SBATCH --nodes=2\n", "#SBATCH --ntasks-per-node=4\n",
        "#SBATCH --gres=gpu:4\n", "#SBATCH --time=02:00:00\n", "#SBATCH --partition=gpu\n",
        "#SBATCH --requeue\n", "srun --kill-on-bad-exit=1",
        "gpulab train --model resnet50 --dataset cifar10 --note 'two words' --resume auto",
        "--output_dir \"$RUN_DIR\"", "RUN_DIR=runs/gpulab-ddp-${SLURM_JOB_ID}"})
    EXPECT_TRUE(has(*s, line)) << line << "\n" << *s;
  EXPECT_FALSE(has(*s, "--container"));
  EXPECT_FALSE(has(*s, "--account"));
  // Every rank sees all of its node's GPUs (NCCL keeps the direct paths): no per-task binding.
  EXPECT_FALSE(has(*s, "--gpus-per-task"));
  EXPECT_FALSE(has(*s, "--cpus-per-task")) << "the node's cores were not given";
}

TEST(SlurmScript, CpusPerTaskFromTheNodesCores) {
  auto r = two_nodes();
  r.cores_per_node = 64;  // 4 GPUs: 16 cores for each rank
  auto s = render_sbatch_script(r);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(has(*s, "#SBATCH --cpus-per-task=16\n")) << *s;
  EXPECT_TRUE(has(*s, "--cpu-bind=cores"));
  r.cores_per_node = 3;  // fewer cores than ranks: one each
  EXPECT_TRUE(has(*render_sbatch_script(r), "#SBATCH --cpus-per-task=1\n"));
  r.cpus_per_task = 6;  // asked for: wins
  EXPECT_TRUE(has(*render_sbatch_script(r), "#SBATCH --cpus-per-task=6\n"));
}

TEST(SlurmScript, CpuRanksNoRequeueAndContainers) {
  auto r = two_nodes();
  r.cpu_ranks_per_node = 2;
  r.cpus_per_task = 8;
  r.requeue = false;
  auto s = render_sbatch_script(r);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(has(*s, "#SBATCH --ntasks-per-node=2\n"));
  EXPECT_TRUE(has(*s, "#SBATCH --cpus-per-task=8\n"));
  EXPECT_TRUE(has(*s, "--cpu-bind=cores"));
  EXPECT_FALSE(has(*s, "--gres"));
  EXPECT_FALSE(has(*s, "--requeue"));
  EXPECT_FALSE(has(*s, "--resume auto"));
  r = two_nodes();
  r.image = "nvcr.io#nvidia/pytorch:24.01-py3";
  r.container = ContainerKind::kPyxis;
  r.mounts = {"/data:/workspace/data"};
  s = render_sbatch_script(r);
  EXPECT_TRUE(has(*s, "--container-image='nvcr.io#nvidia/pytorch:24.01-py3'")) << *s;
  EXPECT_TRUE(has(*s, "--container-mounts=\"$PWD\":\"$PWD\",/data:/workspace/data"));
  r.image = "/shared/bundles/cpu-lab";
  r.container = ContainerKind::kOci;
  EXPECT_TRUE(has(*render_sbatch_script(r), "--container=/shared/bundles/cpu-lab"));
}

TEST(SlurmScript, RefusesBadRequests) {
  auto expect_bad = [](SlurmJobRequest r, const std::string& want) {
    auto s = render_sbatch_script(r);
    ASSERT_FALSE(s.ok()) << want;
    EXPECT_TRUE(has(s.error().message, want)) << s.error().message;
    EXPECT_FALSE(s.error().hint.empty()) << want;
  };
  auto r = two_nodes();
  r.time_limit = "soon";
  expect_bad(r, "is not a Slurm time limit");
  r = two_nodes();
  r.gpus_per_node = 0;
  expect_bad(r, "out of range 1..64");
  r = two_nodes();
  r.partition = "gpu\n#SBATCH --exclusive";
  expect_bad(r, "has characters Slurm does not take");
  r = two_nodes();
  r.output = "a b.out";
  expect_bad(r, "is not a file name sbatch takes");
  r = two_nodes();
  r.train_flags = "--model resnet18 --master_port=1234";
  expect_bad(r, "which the Slurm script decides");
  r = two_nodes();
  r.train_flags = "--model \"resnet18";
  expect_bad(r, "unclosed quote");
  for (const char* t : {"30", "1:00", "01:00:00", "1-12", "2-00:30:00", "UNLIMITED"}) {
    r = two_nodes();
    r.time_limit = t;
    EXPECT_TRUE(render_sbatch_script(r).ok()) << t;
  }
}

TEST(SlurmScript, ContainerChoice) {
  ContainerSupport none, pyxis{true, true}, oci{false, true};
  EXPECT_EQ(*choose_container("auto", "", pyxis), ContainerKind::kNone);
  EXPECT_EQ(*choose_container("auto", "lab:latest", pyxis), ContainerKind::kPyxis);
  EXPECT_EQ(*choose_container("auto", "/shared/lab", oci), ContainerKind::kOci);
  EXPECT_EQ(*choose_container("none", "/shared/lab", oci), ContainerKind::kNone);
  EXPECT_FALSE(choose_container("auto", "lab:latest", oci).ok());  // not a bundle folder
  EXPECT_FALSE(choose_container("auto", "lab:latest", none).ok());
  EXPECT_FALSE(choose_container("pyxis", "lab:latest", oci).ok());
  EXPECT_FALSE(choose_container("pyxis", "", pyxis).ok());
  EXPECT_FALSE(choose_container("docker", "lab", pyxis).ok());
}

TEST(SlurmScript, JobIdsAndQuoting) {
  EXPECT_TRUE(check_job_id("1234").ok());
  EXPECT_TRUE(check_job_id("1234_7").ok());
  for (const char* bad : {"", "abc", "1;rm -rf /", "12 13", "-1"})
    EXPECT_FALSE(check_job_id(bad).ok()) << bad;
  EXPECT_EQ(shell_quote("--lr=0.1"), "--lr=0.1");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(*split_flags("a 'b c' \"d\"  e"), std::vector<std::string>({"a", "b c", "d", "e"}));
}
