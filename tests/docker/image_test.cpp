// Images on real engines: commit a container with labels, save it to a tar and load it into a
// second engine (moving between machines), build from a tar context, import, tag, remove, and
// the errors for a broken build and a corrupt archive.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/files.h"
#include "core/tar.h"
#include "support/docker_fixture.h"

namespace gpulab::docker {
namespace {

namespace fs = std::filesystem;
using testing::kBusyboxImage;
using testing::unique_name;

struct ObjectCleanup {
  const Client& client;
  std::string id;
  bool image = false;
  ~ObjectCleanup() {
    if (id.empty()) return;
    if (image)
      (void)client.remove_image(id, true);
    else
      (void)client.remove_container(id, true);
  }
};

fs::path scratch_dir() {
  fs::path d = fs::temp_directory_path() / unique_name("img");
  fs::create_directories(d);
  return d;
}

TEST(Image, CommitSaveLoadIntoSecondEngine) {
  GPULAB_REQUIRE_DOCKER(client);
  auto peer_engine = testing::peer_engine();
  if (!peer_engine.ok() && peer_engine.error().code == Code::kUnsupported)
    GTEST_SKIP() << peer_engine.error().to_string();
  ASSERT_TRUE(peer_engine.ok()) << peer_engine.error().to_string();
  auto peer = testing::client_for(*peer_engine);
  ASSERT_TRUE(peer.ok()) << peer.error().to_string();

  CreateSpec s;
  s.name = unique_name("snap");
  s.image = kBusyboxImage;
  s.cmd = {"/bin/sh", "-c", "echo state-$RANDOM > /root/state.txt; while true; do sleep 0.2; done"};
  auto id = client.create_container(s);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  ObjectCleanup gc{client, *id};
  ASSERT_TRUE(client.start_container(*id).ok());
  std::string state;
  for (int i = 0; i < 50 && state.empty(); ++i)
    state = client.exec(*id, {"cat", "/root/state.txt"})->out;
  ASSERT_NE(state.find("state-"), std::string::npos);

  std::string repo = "gpulab-test/" + unique_name("snap");
  CommitSpec cs;
  cs.repo = repo;
  cs.tag = "v1";
  cs.comment = "snapshot for the move test";
  cs.labels = {{"gpulab.snapshot", "my-experiment-v1"}};
  auto img = client.commit(*id, cs);
  ASSERT_TRUE(img.ok()) << img.error().to_string();
  ObjectCleanup gi{client, repo + ":v1", true};
  auto info = client.inspect_image(repo + ":v1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->id, *img);
  EXPECT_EQ(info->comment, "snapshot for the move test");
  EXPECT_EQ(info->labels.at("gpulab.snapshot"), "my-experiment-v1");
  ImageListOptions by_label;
  by_label.labels = {"gpulab.snapshot=my-experiment-v1"};
  auto listed = client.list_images(by_label);
  ASSERT_TRUE(listed.ok());
  bool found = false;
  for (const auto& i : *listed) found |= i.id == *img;
  EXPECT_TRUE(found);

  fs::path dir = scratch_dir();
  fs::path tar = dir / "backup.tar";
  ASSERT_TRUE(client.save_images({repo + ":v1"}, tar).ok());
  EXPECT_FALSE(fs::exists(dir / "backup.tar.partial"));
  auto manifest = TarReader::read_member(tar, "manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.error().to_string();
  EXPECT_NE(manifest->find(repo + ":v1"), std::string::npos) << *manifest;

  (void)peer->remove_image(repo + ":v1", true);
  auto loaded = peer->load_images(tar);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0], repo + ":v1");
  ObjectCleanup gp{*peer, repo + ":v1", true};
  auto moved = peer->inspect_image(repo + ":v1");
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->id, *img);
  EXPECT_EQ(moved->labels.at("gpulab.snapshot"), "my-experiment-v1");

  // The restored container on the other engine has the committed file.
  CreateSpec r;
  r.name = unique_name("restored");
  r.image = repo + ":v1";
  r.cmd = {"cat", "/root/state.txt"};
  auto rid = peer->create_container(r);
  ASSERT_TRUE(rid.ok()) << rid.error().to_string();
  ObjectCleanup gr{*peer, *rid};
  ASSERT_TRUE(peer->start_container(*rid).ok());
  EXPECT_EQ(*peer->wait_container(*rid), 0);
  EXPECT_EQ(peer->logs(*rid)->out, state);
  fs::remove_all(dir);
}

TEST(Image, CorruptArchiveLoadIsDataError) {
  GPULAB_REQUIRE_DOCKER(client);
  fs::path dir = scratch_dir();
  ASSERT_TRUE(write_file_atomic(dir / "junk.tar", std::string(4096, 'j')).ok());
  auto r = client.load_images(dir / "junk.tar");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Code::kDataError) << r.error().to_string();
  EXPECT_EQ(client.load_images(dir / "absent.tar").error().code, Code::kNotFound);
  fs::remove_all(dir);
}

TEST(Image, BuildFromTarContextReportsProgressAndErrors) {
  GPULAB_REQUIRE_DOCKER(client);
  fs::path dir = scratch_dir();
  std::string tag = "gpulab-test/" + unique_name("built") + ":latest";
  {
    auto w = TarWriter::create(dir / "ctx.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(
        w->add_file("Dockerfile",
                    std::string("FROM ") + kBusyboxImage +
                        "\nARG GREETING\nCOPY hello.txt /hello.txt\n"
                        "RUN echo \"$GREETING\" >> /hello.txt\nCMD [\"cat\", \"/hello.txt\"]\n")
            .ok());
    ASSERT_TRUE(w->add_file("hello.txt", "from the context\n").ok());
    ASSERT_TRUE(w->finish().ok());
  }
  BuildSpec b;
  b.context_tar = dir / "ctx.tar";
  b.tags = {tag};
  b.build_args = {{"GREETING", "built by gpulab"}};
  b.labels = {{"gpulab.recipe", "test"}};
  std::vector<std::string> lines;
  auto id = client.build_image(b, [&](const Progress& p) {
    if (!p.stream.empty()) lines.push_back(p.stream);
  });
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  ObjectCleanup gi{client, tag, true};
  // The classic builder's step lines reach the callback as they happen.
  EXPECT_TRUE(
      std::any_of(lines.begin(), lines.end(),
                  [](const std::string& l) { return l.find("Step 1/") != std::string::npos; }))
      << lines.size() << " lines";
  auto info = client.inspect_image(tag);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->id, *id);
  EXPECT_EQ(info->labels.at("gpulab.recipe"), "test");

  CreateSpec s;
  s.name = unique_name("built");
  s.image = tag;
  auto cid = client.create_container(s);
  ASSERT_TRUE(cid.ok());
  ObjectCleanup gc{client, *cid};
  ASSERT_TRUE(client.start_container(*cid).ok());
  EXPECT_EQ(*client.wait_container(*cid), 0);
  EXPECT_EQ(client.logs(*cid)->out, "from the context\nbuilt by gpulab\n");

  // A failing RUN: the error carries the engine's errorDetail.
  {
    auto w = TarWriter::create(dir / "bad.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(
        w->add_file("Dockerfile", std::string("FROM ") + kBusyboxImage + "\nRUN exit 42\n").ok());
    ASSERT_TRUE(w->finish().ok());
  }
  b.context_tar = dir / "bad.tar";
  b.tags = {};
  auto bad = client.build_image(b);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Code::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("42"), std::string::npos) << bad.error().message;
  fs::remove_all(dir);
}

TEST(Image, ImportTagRemove) {
  GPULAB_REQUIRE_DOCKER(client);
  fs::path dir = scratch_dir();
  {
    auto w = TarWriter::create(dir / "rootfs.tar");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->add_directory("etc").ok());
    ASSERT_TRUE(w->add_file("etc/motd", "imported\n").ok());
    ASSERT_TRUE(w->finish().ok());
  }
  std::string repo = "gpulab-test/" + unique_name("imp");
  ImportSpec is;
  is.rootfs_tar = dir / "rootfs.tar";
  is.repo = repo;
  is.tag = "v1";
  is.message = "test import";
  is.changes = {"ENV GPULAB_IMPORTED=1", "EXPOSE 22"};
  auto id = client.import_image(is);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  auto info = client.inspect_image(repo + ":v1");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->id, *id);
  EXPECT_EQ(info->comment, "test import");
  EXPECT_NE(std::find(info->env.begin(), info->env.end(), "GPULAB_IMPORTED=1"), info->env.end());
  EXPECT_EQ(info->exposed_ports, std::vector<std::string>{"22/tcp"});

  ASSERT_TRUE(client.tag_image(repo + ":v1", repo, "v2").ok());
  EXPECT_EQ(client.inspect_image(repo + ":v2")->id, *id);
  ASSERT_TRUE(client.remove_image(repo + ":v1").ok());
  ASSERT_TRUE(client.remove_image(repo + ":v2").ok());
  EXPECT_EQ(client.inspect_image(repo + ":v2").error().code, Code::kNotFound);
  EXPECT_EQ(client.remove_image(repo + ":v2").error().code, Code::kNotFound);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpulab::docker
