// A SIGKILL while a checkpoint is being written never leaves one that --resume would load:
// the run pauses halfway through writing epoch 2's checkpoint (test hook), is killed, and
// --resume auto continues from epoch 1's complete checkpoint.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/files.h"
#include "train/checkpoint.h"
#include "trainer_test_util.h"

namespace gpulab::train {
namespace {

// Starts `argv` with stdout and stderr going to files and an extra environment variable.
pid_t spawn(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err,
            const std::string& env) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::putenv(const_cast<char*>(env.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

TEST(TrainerKill, KillDuringCheckpointWriteResumesFromThePreviousOne) {
  if (!testing::have_fashion_mnist()) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const auto dir = testing::temp_dir("kill");
  const fs::path out_dir = dir / "run";
  std::vector<std::string> args = {
      GPULAB_HOOKS_BINARY, "train", "--model",  "resnet18", "--dataset",    "fashion-mnist",
      "--input_size",      "32",    "--subset", "64",       "--batch_size", "32",
      "--num_epochs",      "3",     "--seed",   "1",        "--output_dir", out_dir.string()};
  const std::string env = "GPULAB_TEST_CHECKPOINT_PAUSE=2:120000";
  pid_t pid = spawn(args, dir / "out.txt", dir / "err.txt", env);
  ASSERT_GT(pid, 0);

  // Wait until the process says it is halfway through writing epoch 2's checkpoint.
  bool paused = false;
  for (int i = 0; i < 1200 && !paused; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    auto err = read_file(dir / "err.txt");
    paused = err && err->find("test hook pausing mid-write") != std::string::npos;
    int status = 0;
    if (!paused && ::waitpid(pid, &status, WNOHANG) == pid) {
      FAIL() << "training ended before the pause: " << read_file(dir / "out.txt").value_or("")
             << read_file(dir / "err.txt").value_or("");
    }
  }
  ASSERT_TRUE(paused) << "the checkpoint test hook never fired";
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));

  // On disk: epoch 1 complete, epoch 2 only as a half-written temporary.
  const fs::path ckpts = out_dir / "checkpoints";
  bool partial = false;
  for (const auto& e : fs::directory_iterator(ckpts))
    partial |= e.path().filename().string().find("ckpt-e0002") != std::string::npos &&
               e.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_TRUE(partial) << "expected a partial temporary of epoch 2";
  auto found = find_resumable(ckpts);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->epoch, 1);

  // --resume auto continues from epoch 1 and finishes.
  args.insert(args.end(), {"--resume", "auto"});
  auto r = testing::run_gpulab(std::vector<std::string>(args.begin() + 1, args.end()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Resumed from " + (ckpts / "ckpt-e0001").string()), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Epoch 2/3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Epoch 3/3"), std::string::npos) << r.out;
  EXPECT_EQ(find_resumable(ckpts)->epoch, 3);
  // The stale temporary was cleaned once a new checkpoint was written.
  for (const auto& e : fs::directory_iterator(ckpts))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::train
