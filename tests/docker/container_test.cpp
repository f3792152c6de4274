// Container lifecycle against a real dockerd with the busybox test image: create with the typed
// spec, start, exec, logs, stats, update, rename, stop, wait, remove, and the error codes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "core/tar.h"
#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

using testing::kBusyboxImage;
using testing::unique_name;
using Cleanup = testing::ContainerCleanup;

CreateSpec sleeper(const std::string& name) {
  CreateSpec s;
  s.name = name;
  s.image = kBusyboxImage;
  s.cmd = {"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"};
  return s;
}

TEST(Container, LifecycleWithLimitsExecLogsStats) {
  GPULAB_REQUIRE_DOCKER(client);
  std::string name = unique_name("life");
  CreateSpec spec = sleeper(name);
  spec.cmd = {
      "/bin/sh", "-c",
      "echo to-stdout; echo to-stderr >&2; trap 'exit 0' TERM; while true; do sleep 0.2; done"};
  spec.env = {"GPULAB_TEST=yes"};
  spec.labels = {{"gpulab.test", "container"}, {"gpulab.owner", "alice"}};
  spec.nano_cpus = 500'000'000;
  spec.memory_bytes = 64 << 20;
  spec.shm_size_bytes = 32 << 20;
  spec.pids_limit = 64;
  spec.restart_policy.name = "unless-stopped";
  auto id = client.create_container(spec);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  Cleanup guard{client, *id};

  auto created = client.inspect_container(name);
  ASSERT_TRUE(created.ok()) << created.error().to_string();
  EXPECT_EQ(created->id, *id);
  EXPECT_EQ(created->name, name);
  EXPECT_EQ(created->status, "created");
  EXPECT_EQ(created->nano_cpus, 500'000'000);
  EXPECT_EQ(created->memory_bytes, 64 << 20);
  EXPECT_EQ(created->shm_size_bytes, 32 << 20);
  EXPECT_EQ(created->pids_limit, 64);
  EXPECT_EQ(created->restart_policy.name, "unless-stopped");
  EXPECT_EQ(created->labels.at("gpulab.owner"), "alice");
  // What CreateSpec cannot express stays at the engine's safe defaults.
  EXPECT_FALSE(created->raw["HostConfig"]["Privileged"].get<bool>());
  EXPECT_TRUE(created->raw["HostConfig"]["Binds"].is_null());
  EXPECT_EQ(created->raw["HostConfig"]["NetworkMode"], "default");

  ASSERT_TRUE(client.start_container(name).ok());
  ASSERT_TRUE(client.start_container(name).ok())
      << "starting a running container is not an error (304)";
  auto running = client.inspect_container(*id);
  ASSERT_TRUE(running.ok());
  EXPECT_TRUE(running->running);
  EXPECT_GT(running->pid, 0);

  auto ex = client.exec(name, {"/bin/sh", "-c",
                               "echo $GPULAB_TEST; cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || "
                               "cat /sys/fs/cgroup/pids.max; echo oops >&2; exit 3"});
  ASSERT_TRUE(ex.ok()) << ex.error().to_string();
  EXPECT_EQ(ex->exit_code, 3);
  EXPECT_EQ(ex->out, "yes\n64\n");
  EXPECT_EQ(ex->err, "oops\n");

  // Big output crosses many frames of the multiplexed stream.
  auto big = client.exec(
      name, {"/bin/sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done"});
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->exit_code, 0);
  EXPECT_EQ(std::count(big->out.begin(), big->out.end(), '\n'), 3000);
  EXPECT_EQ(big->out.substr(big->out.size() - 10), "line-2999\n");

  auto logs = client.logs(name);
  ASSERT_TRUE(logs.ok()) << logs.error().to_string();
  EXPECT_EQ(logs->out, "to-stdout\n");
  EXPECT_EQ(logs->err, "to-stderr\n");
  LogOptions only_err;
  only_err.stdout_ = false;
  EXPECT_EQ(client.logs(name, only_err)->out, "");

  auto stats = client.stats(name);
  ASSERT_TRUE(stats.ok()) << stats.error().to_string();
  EXPECT_GT(stats->memory_usage_bytes, 0);
  EXPECT_EQ(stats->memory_limit_bytes, 64 << 20);
  EXPECT_GT(stats->pids, 0);
  EXPECT_GE(stats->cpu_percent, 0.0);
  EXPECT_LE(stats->cpu_percent, 100.0 * stats->online_cpus);
  EXPECT_GE(stats->net_rx_bytes, 0);

  ResourceUpdate up;
  up.nano_cpus = 1'000'000'000;
  up.pids_limit = 100;
  ASSERT_TRUE(client.update_container(name, up).ok());
  EXPECT_EQ(client.inspect_container(name)->nano_cpus, 1'000'000'000);

  std::string renamed = name + "-renamed";
  ASSERT_TRUE(client.rename_container(name, renamed).ok());
  EXPECT_EQ(client.inspect_container(*id)->name, renamed);

  ASSERT_TRUE(client.stop_container(renamed, 5).ok());
  auto stopped = client.inspect_container(*id);
  EXPECT_FALSE(stopped->running);
  EXPECT_EQ(stopped->status, "exited");
  EXPECT_EQ(stopped->exit_code, 0);
  ASSERT_TRUE(client.stop_container(renamed).ok())
      << "stopping a stopped container is not an error (304)";

  ASSERT_TRUE(client.restart_container(renamed, 1).ok());
  EXPECT_TRUE(client.inspect_container(*id)->running);
  ASSERT_TRUE(client.kill_container(renamed).ok());
  ASSERT_TRUE(client.remove_container(renamed).ok());
  EXPECT_EQ(client.inspect_container(*id).error().code, Code::kNotFound);
  guard.id.clear();
}

TEST(Container, ListFiltersByLabelAndWaitGivesExitCode) {
  GPULAB_REQUIRE_DOCKER(client);
  std::string tag = unique_name("label");
  CreateSpec a;
  a.name = unique_name("exit7");
  a.image = kBusyboxImage;
  a.cmd = {"/bin/sh", "-c", "exit 7"};
  a.labels = {{"gpulab.test.run", tag}};
  auto ida = client.create_container(a);
  ASSERT_TRUE(ida.ok()) << ida.error().to_string();
  Cleanup ga{client, *ida};
  CreateSpec b = sleeper(unique_name("other"));
  b.labels = {{"gpulab.test.run", "someone-else"}};
  auto idb = client.create_container(b);
  ASSERT_TRUE(idb.ok());
  Cleanup gb{client, *idb};

  ListOptions opts;
  opts.labels = {"gpulab.test.run=" + tag};
  auto list = client.list_containers(opts);
  ASSERT_TRUE(list.ok()) << list.error().to_string();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, *ida);
  EXPECT_EQ((*list)[0].name, a.name);
  EXPECT_EQ((*list)[0].state, "created");

  ASSERT_TRUE(client.start_container(*ida).ok());
  auto code = client.wait_container(*ida);
  ASSERT_TRUE(code.ok()) << code.error().to_string();
  EXPECT_EQ(*code, 7);
  opts.all = false;  // running only
  EXPECT_TRUE(client.list_containers(opts)->empty());
}

TEST(Container, ErrorsMapToCodes) {
  GPULAB_REQUIRE_DOCKER(client);
  auto missing = client.inspect_container("gpulab-t-no-such-container");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Code::kNotFound);
  EXPECT_NE(missing.error().message.find("gpulab-t-no-such-container"), std::string::npos);
  EXPECT_EQ(client.start_container("gpulab-t-no-such-container").error().code, Code::kNotFound);
  EXPECT_EQ(client.remove_container("gpulab-t-no-such-container").error().code, Code::kNotFound);

  CreateSpec s = sleeper(unique_name("dup"));
  auto id = client.create_container(s);
  ASSERT_TRUE(id.ok());
  Cleanup g{client, *id};
  auto dup = client.create_container(s);
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, Code::kAlreadyExists) << dup.error().to_string();

  ASSERT_TRUE(client.start_container(*id).ok());
  auto rm = client.remove_container(*id, /*force=*/false);
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.error().code, Code::kConflict) << rm.error().to_string();

  CreateSpec no_image = sleeper(unique_name("noimg"));
  no_image.image = "gpulab-test/not-built:latest";
  auto ni = client.create_container(no_image);
  ASSERT_FALSE(ni.ok());
  EXPECT_EQ(ni.error().code, Code::kNotFound);
  EXPECT_NE(ni.error().hint.find("no registry pull"), std::string::npos);

  CreateSpec bad = sleeper("has/slash");
  EXPECT_EQ(client.create_container(bad).error().code, Code::kInvalidArgument);
  bad = sleeper(unique_name("port"));
  bad.ports = {{70000, "tcp", 0, "0.0.0.0"}};
  EXPECT_EQ(client.create_container(bad).error().code, Code::kInvalidArgument);
  bad.ports = {};
  bad.devices = {{"/etc/passwd", "", "rwm"}};
  EXPECT_EQ(client.create_container(bad).error().code, Code::kInvalidArgument);
}

TEST(Container, FollowLogsStreamsUntilStoppedOrCancelled) {
  GPULAB_REQUIRE_DOCKER(client);
  CreateSpec s = sleeper(unique_name("follow"));
  s.cmd = {"/bin/sh", "-c",
           "i=0; while true; do echo tick-$i; echo err-$i >&2; i=$((i+1)); sleep 0.1; done"};
  auto id = client.create_container(s);
  ASSERT_TRUE(id.ok());
  Cleanup g{client, *id};
  ASSERT_TRUE(client.start_container(*id).ok());
  LogOptions follow;
  follow.follow = true;
  std::string out, err;
  // The callback ends the stream once it has seen enough.
  auto st = client.logs_stream(*id, follow, [&](bool is_stderr, std::string_view d) {
    (is_stderr ? err : out).append(d);
    return out.find("tick-5\n") == std::string::npos;
  });
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(out.substr(0, 14), "tick-0\ntick-1\n");
  EXPECT_EQ(err.substr(0, 12), "err-0\nerr-1\n");
  // The cancel flag ends it from another thread.
  std::atomic<bool> cancel{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    cancel = true;
  });
  int chunks = 0;
  auto t0 = std::chrono::steady_clock::now();
  st = client.logs_stream(
      *id, follow, [&](bool, std::string_view) { return ++chunks > 0; }, &cancel);
  t.join();
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_GT(chunks, 10);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(Container, ArchiveCopiesFilesInAndOut) {
  GPULAB_REQUIRE_DOCKER(client);
  auto id = client.create_container(sleeper(unique_name("archive")));
  ASSERT_TRUE(id.ok());
  Cleanup g{client, *id};
  ASSERT_TRUE(client.start_container(*id).ok());
  auto dir = std::filesystem::temp_directory_path() / unique_name("archive-files");
  std::filesystem::create_directories(dir);
  {
    auto w = TarWriter::create(dir / "in.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->add_file("hello.txt", "hello from the host\n").ok());
    ASSERT_TRUE(w->finish().ok());
  }
  ASSERT_TRUE(client.copy_to_container(*id, "/tmp", dir / "in.tar").ok());
  EXPECT_EQ(client.exec(*id, {"cat", "/tmp/hello.txt"})->out, "hello from the host\n");
  ASSERT_TRUE(client.exec(*id, {"/bin/sh", "-c", "echo made inside > /root/out.txt"})->exit_code ==
              0);
  ASSERT_TRUE(client.copy_from_container(*id, "/root/out.txt", dir / "out.tar").ok());
  EXPECT_EQ(*TarReader::read_member(dir / "out.tar", "out.txt"), "made inside\n");
  EXPECT_EQ(client.copy_from_container(*id, "/no/such/path", dir / "x.tar").error().code,
            Code::kNotFound);
  std::filesystem::remove_all(dir);
}

// gpulab ddp's interactive containers (the seed's `docker run --rm`): `docker stop` removes
// them. The password goes in through put_file, which uses no temporary folder.
TEST(Container, AutoRemoveGoesAwayOnStopAndPutFileLeavesNoFolder) {
  GPULAB_REQUIRE_DOCKER(client);
  CreateSpec spec = sleeper(unique_name("autorm"));
  spec.auto_remove = true;
  auto id = client.create_container(spec);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  Cleanup g{client, *id};
  auto tmp = std::filesystem::temp_directory_path() / unique_name("put-tmp");
  std::filesystem::create_directories(tmp);
  std::string old_tmpdir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  auto put = client.put_file(*id, "/etc/gpulab/secret", "s3cret\n", 0600);
  if (old_tmpdir.empty()) {
    ::unsetenv("TMPDIR");
  } else {
    ::setenv("TMPDIR", old_tmpdir.c_str(), 1);
  }
  ASSERT_TRUE(put.ok()) << put.error().to_string();
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
  std::filesystem::remove_all(tmp);
  ASSERT_TRUE(client.start_container(*id).ok());
  EXPECT_EQ(client.exec(*id, {"cat", "/etc/gpulab/secret"})->out, "s3cret\n");
  EXPECT_TRUE(client.inspect_container(*id)->raw["HostConfig"].value("AutoRemove", false));
  ASSERT_TRUE(client.stop_container(*id, 5).ok());
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    auto r = client.inspect_container(*id);
    gone = !r.ok() && r.error().code == Code::kNotFound;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(gone) << "an auto-remove container is still there after stop";
}

}  // namespace
}  // namespace gpulab::docker
