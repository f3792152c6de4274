// The engine-free half of the GPU probe (gpu_probe.h): the probe script run here over the
// captured host trees, the answer's tar read back into an inventory, and every hostile or
// broken answer refused with the folder left empty.
#include "service/engine/gpu_probe.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/random.h"
#include "core/subprocess.h"
#include "core/tar.h"
#include "gpu/detect.h"

namespace gpulab::service {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) {
  return fs::path(GPULAB_SOURCE_DIR) / "tests" / "fixtures" / name;
}

class GpuProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpulab-probe-test-" + random_string(8));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A tar as Docker's archive endpoint sends a folder: every entry under one top folder.
  std::string tar_of(const std::function<Status(TarWriter&)>& add) {
    const fs::path path = dir_ / ("t-" + random_string(6) + ".tar");
    {
      auto w = TarWriter::create(path);
      EXPECT_TRUE(w.ok());
      EXPECT_TRUE(add(*w).ok());
      EXPECT_TRUE(w->finish().ok());
    }
    return read_file(path).value_or("");
  }
  std::string tree_tar(const fs::path& tree) {
    return tar_of([&](TarWriter& w) { return w.add_tree(tree, "tree"); });
  }

  // Runs the probe script here with its /host and output folder moved to `root` and `out`.
  void run_script(const fs::path& root, const fs::path& out) {
    std::string script = gpu_probe_script();
    auto swap = [&](const std::string& from, const std::string& to) {
      auto at = script.find(from);
      ASSERT_NE(at, std::string::npos) << from;
      script.replace(at, from.size(), to);
    };
    swap("H=/host\n", "H='" + root.string() + "'\n");
    swap(std::string("O=") + kProbeTreeDir + "\n", "O='" + out.string() + "'\n");
    auto r = run_process({"/bin/sh", "-c", script});
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    EXPECT_TRUE(r->success()) << r->err;
    EXPECT_NE(r->out.find(kProbeDoneLine), std::string::npos) << r->out;
  }

  fs::path dir_;
};

// What gpu::detect finds in a captured tree directly, as the service would hand it out.
ServiceInventory direct(const std::string& name) {
  gpu::DetectOptions o;
  o.root = fixture(name);
  o.host_checks = false;
  o.processes = false;
  return inventory_from_detected(gpu::detect(o), o.root);
}

TEST_F(GpuProbeTest, ScriptCopiesWhatDetectionReadsFromEachCapturedHost) {
  struct Case {
    std::string fixture, vendor, gpu_type;
    size_t gpus;
  };
  for (const Case& c :
       {Case{"mi300x-x2", "amd", "rocm", 2}, Case{"h100", "nvidia", "nvidia", 1},
        Case{"rtx4090", "nvidia", "nvidia", 1}, Case{"mi300x-nps2-cpx", "amd", "rocm", 1}}) {
    SCOPED_TRACE(c.fixture);
    const fs::path out = dir_ / c.fixture;
    run_script(fixture(c.fixture), out);
    // The tree holds the kernel files only; the captured smi output stays behind.
    EXPECT_FALSE(fs::exists(out / "commands"));
    auto inv = inventory_from_probe(tree_tar(out), "lab9");
    ASSERT_TRUE(inv.ok()) << inv.error().to_string();
    ASSERT_EQ(inv->gpus.size(), c.gpus);
    EXPECT_EQ(inv->source, "detected");
    EXPECT_EQ(inv->gpu_type, c.gpu_type);
    const ServiceInventory want = direct(c.fixture);
    ASSERT_EQ(want.gpus.size(), c.gpus);
    for (size_t i = 0; i < c.gpus; ++i) {
      EXPECT_EQ(inv->gpus[i].vendor, c.vendor);
      EXPECT_EQ(inv->gpus[i].host, "lab9");
      EXPECT_EQ(inv->gpus[i].uuid, want.gpus[i].uuid);
      EXPECT_EQ(inv->gpus[i].name, want.gpus[i].name);
      EXPECT_EQ(inv->gpus[i].numa_node, want.gpus[i].numa_node);
      EXPECT_EQ(inv->gpus[i].links, want.gpus[i].links);
    }
  }
}

// Detection numbers each vendor from 0; one host's GPUs get one list of indices, and a link
// joins the GPUs of its own vendor only.
TEST_F(GpuProbeTest, AHostWithBothVendorsHasEachIndexOnce) {
  run_script(fixture("mixed"), dir_ / "out");
  auto inv = inventory_from_probe(tree_tar(dir_ / "out"), "lab9");
  ASSERT_TRUE(inv.ok()) << inv.error().to_string();
  ASSERT_EQ(inv->gpus.size(), 3u);
  EXPECT_EQ(inv->gpu_type, "mixed");
  EXPECT_EQ(inv->gpus[0].vendor, "nvidia");
  EXPECT_EQ(inv->gpus[0].name, "NVIDIA GeForce RTX 4090");
  EXPECT_TRUE(inv->gpus[0].links.empty());
  for (int i : {1, 2}) {
    EXPECT_EQ(inv->gpus[i].index, i);
    EXPECT_EQ(inv->gpus[i].vendor, "amd");
    EXPECT_EQ(inv->gpus[i].links, std::vector<int>{3 - i});  // the XGMI pair: 1 <-> 2
  }
}

// Two servers of one model have the same PCI addresses: a GPU without its own UUID is booked
// under its host's name, so lab2's GPU 0 never blocks lab3's; a real UUID stays as it is.
TEST_F(GpuProbeTest, IdsThatAreNotUuidsAreQualifiedByTheirHost) {
  run_script(fixture("mi300x-x2"), dir_ / "out");
  const std::string with_uuids = tree_tar(dir_ / "out");
  for (const auto& f : fs::recursive_directory_iterator(dir_ / "out"))
    if (f.path().filename() == "unique_id") fs::remove(f.path());
  const std::string without = tree_tar(dir_ / "out");
  auto lab2 = inventory_from_probe(without, "lab2");
  auto lab3 = inventory_from_probe(without, "lab3");
  auto own = inventory_from_probe(with_uuids, "lab2");
  ASSERT_TRUE(lab2.ok() && lab3.ok() && own.ok());
  ASSERT_EQ(lab2->gpus.size(), 2u);
  ASSERT_EQ(lab3->gpus.size(), 2u);
  ASSERT_EQ(own->gpus.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(lab2->gpus[i].uuid.rfind("lab2/0000:", 0), 0u) << lab2->gpus[i].uuid;
    EXPECT_EQ(lab3->gpus[i].uuid.rfind("lab3/0000:", 0), 0u) << lab3->gpus[i].uuid;
    EXPECT_EQ(lab2->gpus[i].uuid.substr(5), lab3->gpus[i].uuid.substr(5));
    EXPECT_EQ(own->gpus[i].uuid.rfind("0x", 0), 0u) << own->gpus[i].uuid;
    EXPECT_EQ(own->gpus[i].host, "lab2");
  }
}

TEST_F(GpuProbeTest, AnEmptyHostGivesNoGpuAndSaysWhy) {
  fs::create_directories(dir_ / "empty-root");
  run_script(dir_ / "empty-root", dir_ / "out");
  auto inv = inventory_from_probe(tree_tar(dir_ / "out"), "lab9");
  ASSERT_TRUE(inv.ok()) << inv.error().to_string();
  EXPECT_TRUE(inv->gpus.empty());
  EXPECT_EQ(inv->source, "none");
  EXPECT_EQ(inv->gpu_type, "none");
  EXPECT_NE(inv->note.find("neither NVIDIA nor ROCm"), std::string::npos) << inv->note;
}

TEST_F(GpuProbeTest, AnAmdRenderNodeComesFromTheTreesUevent) {
  run_script(fixture("mi300x-x2"), dir_ / "out");
  const fs::path dev = dir_ / "out/sys/class/drm/renderD136/device";
  fs::create_directories(dev);
  ASSERT_TRUE(
      write_file_atomic(dev / "uevent", "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:65:00.0\n").ok());
  auto inv = inventory_from_probe(tree_tar(dir_ / "out"), "lab9");
  ASSERT_TRUE(inv.ok()) << inv.error().to_string();
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].render_node, "");  // its render node's uevent was not captured
  EXPECT_EQ(inv->gpus[1].render_node, "/dev/dri/renderD136");
  EXPECT_EQ(inv->gpus[1].render_node_in_container, "/dev/dri/renderD136");
}

TEST_F(GpuProbeTest, HostileOrBrokenAnswersAreRefusedAndLeaveNothing) {
  struct Case {
    std::string what;
    std::function<Status(TarWriter&)> add;
  };
  const std::vector<Case> cases = {
      {"a symlink", [](TarWriter& w) { return w.add_symlink("tree/sys", "/etc"); }},
      {"..", [](TarWriter& w) { return w.add_file("tree/../../etc/passwd", "x"); }},
      {"an absolute name", [](TarWriter& w) { return w.add_file("/etc/passwd", "x"); }},
      {"a second top folder",
       [](TarWriter& w) {
         auto st = w.add_file("tree/a", "x");
         return st ? w.add_file("other/b", "y") : st;
       }},
      {"a hard link",
       [](TarWriter& w) {
         TarEntry e;
         e.name = "tree/link";
         e.type = TarType::kHardLink;
         e.link_target = "etc/shadow";
         return w.add(e);
       }},
      {"a device",
       [](TarWriter& w) {
         TarEntry e;
         e.name = "tree/dev/sda";
         e.type = TarType::kBlockDevice;
         return w.add(e);
       }},
      {"a file given twice",
       [](TarWriter& w) {
         auto st = w.add_file("tree/a", "x");
         return st ? w.add_file("tree/a", "y") : st;
       }},
      {"a file that is also a folder",
       [](TarWriter& w) {
         auto st = w.add_file("tree/a", "x");
         return st ? w.add_file("tree/a/b", "y") : st;
       }},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    const fs::path dest = dir_ / "dest";
    fs::create_directories(dest);
    auto st = unpack_probe_tree(tar_of(c.add), dest);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, Code::kDataError);
    EXPECT_NE(st.error().message.find("refused"), std::string::npos) << st.error().message;
    // Nothing outside the folder; a link or device never lands inside it.
    for (const auto& e : fs::recursive_directory_iterator(dest))
      EXPECT_TRUE(e.is_directory() || e.is_regular_file()) << e.path();
    fs::remove_all(dest);
  }
}

TEST_F(GpuProbeTest, GarbageEmptyAndOversizedAnswersAreDataErrors) {
  for (const std::string& bytes :
       {std::string(), std::string("gpulab-probe: done\nnot a tar at all\n"),
        std::string(1536, '\x7f')}) {
    auto inv = inventory_from_probe(bytes, "lab9");
    ASSERT_FALSE(inv.ok());
    EXPECT_EQ(inv.error().code, Code::kDataError) << inv.error().to_string();
  }
  // Over the limits: one big file, many entries, a deep path, a big archive.
  ProbeTreeLimits small;
  small.max_file_bytes = 10;
  small.max_entries = 3;
  small.max_depth = 4;
  small.max_archive_bytes = 8192;
  const std::vector<std::pair<std::string, std::string>> over = {
      {"file", tar_of([](TarWriter& w) { return w.add_file("tree/big", std::string(11, 'x')); })},
      {"entries", tar_of([](TarWriter& w) {
         Status st = ok_status();
         for (int i = 0; i < 4 && st; ++i) st = w.add_file("tree/f" + std::to_string(i), "x");
         return st;
       })},
      {"depth", tar_of([](TarWriter& w) { return w.add_file("tree/a/b/c/d/e", "x"); })},
      {"archive",
       tar_of([](TarWriter& w) { return w.add_file("tree/a", std::string(9000, 'x')); })},
  };
  for (const auto& [what, tar] : over) {
    SCOPED_TRACE(what);
    const fs::path dest = dir_ / ("over-" + what);
    fs::create_directories(dest);
    auto st = unpack_probe_tree(tar, dest, small);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, Code::kDataError) << st.error().to_string();
  }
  // A truncated archive.
  std::string cut = tree_tar(fixture("h100"));
  cut.resize(cut.size() / 3);
  auto inv = inventory_from_probe(cut, "lab9");
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.error().code, Code::kDataError);
}

TEST_F(GpuProbeTest, NoTemporaryFolderIsLeftBehind) {
  // The probe's folders go under $TMPDIR: this test's own, so other processes do not count.
  const fs::path tmp = dir_ / "tmp";
  fs::create_directories(tmp);
  const char* was = std::getenv("TMPDIR");
  const std::string old = was ? was : "";
  ::setenv("TMPDIR", tmp.c_str(), 1);
  auto found = inventory_from_probe(tree_tar(fixture("h100")), "lab9");
  auto hostile = inventory_from_probe(
      tar_of([](TarWriter& w) { return w.add_symlink("tree/x", "/"); }), "lab9");
  if (was)
    ::setenv("TMPDIR", old.c_str(), 1);
  else
    ::unsetenv("TMPDIR");
  EXPECT_TRUE(found.ok());
  EXPECT_FALSE(hostile.ok());
  EXPECT_TRUE(fs::is_empty(tmp));
}

}  // namespace
}  // namespace gpulab::service
