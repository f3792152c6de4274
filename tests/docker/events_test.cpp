// The engine's event stream: a container's start and die arrive through the filter, and the
// cancel flag ends an idle stream.
#include <gtest/gtest.h>

#include <thread>

#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

using testing::kBusyboxImage;
using testing::unique_name;

TEST(Events, SeesContainerStartAndDie) {
  GPULAB_REQUIRE_DOCKER(client);
  CreateSpec s;
  s.name = unique_name("ev");
  s.image = kBusyboxImage;
  s.cmd = {"/bin/sh", "-c", "sleep 0.3"};
  s.labels = {{"gpulab.test", "events"}};
  auto id = client.create_container(s);
  ASSERT_TRUE(id.ok()) << id.error().to_string();

  std::vector<Event> seen;
  std::atomic<bool> cancel{false};
  EventFilter f;
  f.types = {"container"};
  f.containers = {*id};
  f.events = {"start", "die"};
  std::thread watcher([&] {
    auto st = client.events(
        f,
        [&](const Event& e) {
          seen.push_back(e);
          return !(e.action == "die");  // stop after the die event
        },
        &cancel);
    EXPECT_TRUE(st.ok()) << st.error().to_string();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the stream is open
  ASSERT_TRUE(client.start_container(*id).ok());
  std::thread guard([&] {
    // If the events never come, do not hang the test forever.
    for (int i = 0; i < 150 && !cancel; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cancel = true;
  });
  watcher.join();
  cancel = true;
  guard.join();
  (void)client.remove_container(*id, true);

  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].action, "start");
  EXPECT_EQ(seen[0].actor_id, *id);
  EXPECT_EQ(seen[0].attributes.at("name"), s.name);
  EXPECT_EQ(seen[0].attributes.at("gpulab.test"), "events");
  EXPECT_EQ(seen[1].action, "die");
  EXPECT_EQ(seen[1].attributes.at("exitCode"), "0");
  EXPECT_GT(seen[0].time, 0);
}

TEST(Events, CancelEndsIdleStream) {
  GPULAB_REQUIRE_DOCKER(client);
  std::atomic<bool> cancel{false};
  EventFilter f;
  f.containers = {"gpulab-t-never-exists"};
  auto t0 = std::chrono::steady_clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancel = true;
  });
  int count = 0;
  auto st = client.events(
      f, [&](const Event&) { return ++count < 100; }, &cancel);
  canceller.join();
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(st.ok()) << st.error().to_string();
  EXPECT_EQ(count, 0);
  EXPECT_LT(took, std::chrono::seconds(5));

  // With `until` in the past, the engine replays and closes the stream itself.
  EventFilter past;
  past.since = 1;
  past.until = 2;
  ASSERT_TRUE(client.events(past, [](const Event&) { return true; }).ok());
}

}  // namespace
}  // namespace gpulab::docker
