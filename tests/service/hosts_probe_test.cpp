// Hosts whose GPUs are found through their own engines (GpuProbe), on the three lab dockerds:
// probe roots at captured GPU trees give each host its GPUs and placement uses them, this
// GPU-less machine gives none and says why, and a missing, hostile, garbage or hanging probe
// image is a logged error per host while the service starts with the others. No probe container
// is left on any engine.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/files.h"
#include "core/random.h"
#include "core/tar.h"
#include "lab_hosts.h"

namespace gpulab::service::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

fs::path gpu_fixture(const std::string& name) {
  return fs::path(GPULAB_SOURCE_DIR) / "tests" / "fixtures" / name;
}

// Probe images that go wrong: their /bin/sh (what the probe runs) is a script of ours.
const char* kHostileImage = "gpulab-test/probe-hostile:latest";  // a link out of its tree
const char* kGarbageImage = "gpulab-test/probe-garbage:latest";  // prints garbage, no tree
const char* kHangImage = "gpulab-test/probe-hang:latest";        // never ends
const char* kMissingImage = "gpulab-test/probe-missing:latest";  // on no engine

class ServiceHostsProbe : public LabHostsTest {
 protected:
  void TearDown() override {
    LabHostsTest::TearDown();
    for (auto& e : engines_)
      for (const char* image : {kHostileImage, kGarbageImage, kHangImage, kMissingImage})
        (void)e.client->remove_image(image, true);
  }

  // The lab over three hosts with no GPUs declared, each probed with busybox under `roots`.
  Json probe_config(const std::vector<std::string>& roots) const {
    Json cfg = lab_config();
    cfg["probe_image"] = gpulab::testing::kBusyboxImage;
    for (size_t i = 0; i < 3; ++i) {
      cfg["hosts"][i].erase("gpus");
      cfg["hosts"][i]["probe_root"] = roots.at(i);
    }
    return cfg;
  }

  // Builds `tag` on engine i: busybox with /bin/sh replaced by `script`.
  void build_bad_probe(int i, const std::string& tag, const std::string& script) {
    const fs::path ctx = dir_ / ("ctx-" + random_string(6) + ".tar");
    {
      auto w = TarWriter::create(ctx);
      ASSERT_TRUE(w.ok());
      ASSERT_TRUE(w->add_file("Dockerfile", std::string("FROM ") + gpulab::testing::kBusyboxImage +
                                                "\nCOPY sh /bin/probe-sh\n"
                                                "RUN [\"/bin/busybox\", \"mv\", \"/bin/probe-sh\", "
                                                "\"/bin/sh\"]\n")
                      .ok());
      ASSERT_TRUE(w->add_file("sh", "#!/bin/busybox sh\n" + script, 0755).ok());
      ASSERT_TRUE(w->finish().ok());
    }
    (void)engines_[i].client->remove_image(tag, true);
    docker::BuildSpec b;
    b.context_tar = ctx;
    b.tags = {tag};
    auto id = engines_[i].client->build_image(b);
    ASSERT_TRUE(id.ok()) << id.error().to_string();
  }

  // Probe containers on any engine, stopped ones too.
  int probe_containers() {
    int n = 0;
    for (auto& e : engines_) {
      docker::ListOptions lo;
      lo.all = true;
      lo.labels = {"gpulab.probe=true"};
      auto list = e.client->list_containers(lo);
      EXPECT_TRUE(list.ok());
      if (list) n += static_cast<int>(list->size());
    }
    return n;
  }

  std::string service_log() const { return read_file(dir_ / "svc" / "service.log").value_or(""); }

  // The service's temporary folders of probes (its TMPDIR): none once the probes are done.
  int probe_tmp_dirs() const {
    int n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(svc_->tmp_dir(), ec))
      if (e.path().filename().string().rfind("gpulab-probe-", 0) == 0) ++n;
    return n;
  }
};

TEST_F(ServiceHostsProbe, CapturedTreesGiveEachHostItsGpusAndPlacementUsesThem) {
  // lab3 reads this machine's own "/": no GPU here.
  const auto t0 = Clock::now();
  start(probe_config({gpu_fixture("mi300x-x2"), gpu_fixture("h100"), "/"}));
  if (HasFatalFailure()) return;
  std::printf("[ figures  ] service start with 3 probes: %.2f s\n",
              std::chrono::duration<double>(Clock::now() - t0).count());
  HttpClient c(svc_->url());

  auto data = c.get(kApi + "/gpus").json()["data"];
  ASSERT_EQ(data["gpus"].size(), 3u) << data.dump();
  EXPECT_EQ(data["source"], "detected");
  EXPECT_EQ(data["gpu_type"], "mixed");
  int amd = 0, nvidia = 0;
  for (const auto& g : data["gpus"]) {
    if (g["vendor"] == "amd") {
      ++amd;
      EXPECT_EQ(g["host"], "lab1");
      EXPECT_EQ(g["name"], "AMD Instinct MI300X");
      EXPECT_EQ(g["links"].size(), 1u) << "the XGMI link of the pair";
    } else {
      ++nvidia;
      EXPECT_EQ(g["host"], "lab2");
      EXPECT_EQ(g["name"], "NVIDIA H100 80GB HBM3");
      EXPECT_EQ(g["uuid"], "GPU-6f3a2b1c-8d4e-4f5a-9b7c-2e1d0a9f8c71");
    }
  }
  EXPECT_EQ(amd, 2);
  EXPECT_EQ(nvidia, 1);

  const Json lab1 = host_state(c, "lab1"), lab3 = host_state(c, "lab3");
  EXPECT_EQ(lab1["gpus"], 2) << lab1.dump();
  EXPECT_EQ(lab1["gpu_source"], "detected");
  EXPECT_EQ(lab1["gpu_probe"]["state"], "ok");
  EXPECT_EQ(lab3["state"], "up");
  EXPECT_EQ(lab3["gpus"], 0) << lab3.dump();
  EXPECT_EQ(lab3["gpu_probe"]["state"], "ok");
  EXPECT_NE(lab3.value("gpu_note", "").find("neither NVIDIA nor ROCm"), std::string::npos)
      << lab3.dump();
  auto status = c.get(kApi + "/status").json()["data"];
  EXPECT_EQ(status["total_gpus"], 3);
  EXPECT_EQ(status["gpu_type"], "mixed");

  // Two GPUs fit only on lab1; one then only on lab2; a third finds none free.
  auto two = create(c, "probed2", 2);
  ASSERT_TRUE(ok(two)) << two.body;
  EXPECT_EQ(two.json()["data"]["host"], "lab1");
  EXPECT_TRUE(on_engine(0, "probed2"));
  auto one = create(c, "probed1", 1);
  ASSERT_TRUE(ok(one)) << one.body;
  EXPECT_EQ(one.json()["data"]["host"], "lab2");
  EXPECT_TRUE(on_engine(1, "probed1"));
  auto none = create(c, "probed3", 1);
  EXPECT_EQ(code(none), "GPU_ALLOCATION_FAILED") << none.body;
  auto held = c.get(kApi + "/gpus").json()["data"]["gpus"];
  for (const auto& g : held) EXPECT_TRUE(g["allocated"].get<bool>()) << g.dump();

  const std::string log = service_log();
  EXPECT_NE(log.find("host lab1: GPU probe found 2 GPU(s) (rocm)"), std::string::npos) << log;
  EXPECT_NE(log.find("host lab2: GPU probe found 1 GPU(s) (nvidia)"), std::string::npos) << log;
  EXPECT_NE(log.find("host lab3: GPU probe of / found no GPU"), std::string::npos) << log;
  EXPECT_EQ(probe_containers(), 0);
  EXPECT_EQ(probe_tmp_dirs(), 0);
}

TEST_F(ServiceHostsProbe, BrokenProbesAreLoggedPerHostAndTheServiceStarts) {
  build_bad_probe(1, kHostileImage,
                  "mkdir -p /gpulab-probe/tree/sys\nln -s /etc /gpulab-probe/tree/sys/class\n"
                  "echo 'gpulab-probe: done'\n");
  build_bad_probe(2, kGarbageImage, "printf '\\001\\377{garbage\\n'\nexit 0\n");
  if (HasFatalFailure()) return;
  Json cfg = probe_config({gpu_fixture("mi300x-x2"), gpu_fixture("h100"), gpu_fixture("h100")});
  cfg["hosts"][0]["probe_image"] = kMissingImage;
  cfg["hosts"][1]["probe_image"] = kHostileImage;
  cfg["hosts"][2]["probe_image"] = kGarbageImage;
  cfg["probe_retry_seconds"] = 1;
  start(cfg);
  if (HasFatalFailure()) return;
  HttpClient c(svc_->url());
  const std::vector<std::pair<std::string, std::string>> why = {
      {"lab1", "is not on that engine"},
      {"lab2", "GPU probe answer refused: entry 'tree/sys/class' is not a plain file or folder"},
      {"lab3", "the probe script did not finish (exit 0)"}};
  for (const auto& [host, text] : why) {
    const Json h = host_state(c, host);
    EXPECT_EQ(h["state"], "up") << h.dump();
    EXPECT_EQ(h["gpus"], 0) << h.dump();
    EXPECT_EQ(h["gpu_probe"]["state"], "failed") << h.dump();
    EXPECT_NE(h["gpu_probe"].value("error", "").find(text), std::string::npos) << h.dump();
    EXPECT_NE(service_log().find("host " + host + ": GPU probe failed"), std::string::npos);
  }
  // The service works without GPUs: a container without one is placed, one with one is not.
  auto zero = create(c, "nogpu", 0);
  EXPECT_TRUE(ok(zero)) << zero.body;
  EXPECT_EQ(code(create(c, "onegpu", 1)), "GPU_ALLOCATION_FAILED");

  // The admin loads the missing image on lab1: its next retry finds the GPUs.
  ASSERT_TRUE(engines_[0]
                  .client->tag_image(gpulab::testing::kBusyboxImage, "gpulab-test/probe-missing")
                  .ok());
  const auto fixed = Clock::now();
  Json lab1;
  while (Clock::now() - fixed < std::chrono::seconds(30)) {
    lab1 = host_state(c, "lab1");
    if (lab1["gpus"] == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(lab1["gpus"], 2) << lab1.dump() << service_log();
  EXPECT_EQ(lab1["gpu_probe"]["state"], "ok");
  std::printf("[ figures  ] lab1's GPUs found %.2f s after its probe image was loaded\n",
              std::chrono::duration<double>(Clock::now() - fixed).count());
  auto placed = create(c, "afterfix", 2);
  ASSERT_TRUE(ok(placed)) << placed.body;
  EXPECT_EQ(placed.json()["data"]["host"], "lab1");
  svc_->stop();
  EXPECT_EQ(probe_containers(), 0);
  EXPECT_EQ(probe_tmp_dirs(), 0);
}

TEST_F(ServiceHostsProbe, AHangingProbeTimesOutAndItsContainerIsRemoved) {
  build_bad_probe(0, kHangImage, "exec /bin/busybox sleep 600\n");
  if (HasFatalFailure()) return;
  Json cfg = probe_config({gpu_fixture("mi300x-x2"), gpu_fixture("h100"), "/no/such/probe/root"});
  cfg["hosts"][0]["probe_image"] = kHangImage;
  cfg["probe_timeout_seconds"] = 2;
  cfg["probe_retry_seconds"] = 3600;
  const auto t0 = Clock::now();
  start(cfg);
  if (HasFatalFailure()) return;
  const double start_s = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("[ figures  ] service start with a 2 s probe timeout on lab1: %.2f s\n", start_s);
  EXPECT_LT(start_s, 30.0);
  HttpClient c(svc_->url());
  const Json lab1 = host_state(c, "lab1"), lab2 = host_state(c, "lab2"),
             lab3 = host_state(c, "lab3");
  EXPECT_EQ(lab1["gpu_probe"]["state"], "failed") << lab1.dump();
  EXPECT_NE(lab1["gpu_probe"].value("error", "").find("after 2 s (probe_timeout_seconds)"),
            std::string::npos)
      << lab1.dump();
  EXPECT_EQ(lab2["gpus"], 1) << lab2.dump();
  // A probe root that is not on the host: the engine refuses the bind, and says so.
  EXPECT_EQ(lab3["gpu_probe"]["state"], "failed") << lab3.dump();
  EXPECT_NE(lab3["gpu_probe"].value("error", "").find("/no/such/probe/root"), std::string::npos)
      << lab3.dump();
  EXPECT_EQ(probe_containers(), 0);
}

}  // namespace
}  // namespace gpulab::service::testing
