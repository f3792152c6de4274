// The service's logic on the engine seam, without a Docker engine (fake_lab.h): what a create
// asks each host (each question once), placement across hosts, GPUs held outside the service,
// a backend without snapshots refusing them through the seam, and the reconciler releasing what
// a container gone from its engine held. Each test runs in milliseconds.
#include <gtest/gtest.h>

#include <cstdio>

#include "fake_lab.h"
#include "service/ops/hosts/reconciler.h"

namespace gpulab::service::testing {
namespace {

Json create_body(const std::string& name, int gpus, const std::string& host = {}) {
  Json j = {{"name", name}, {"image", kFakeImage}, {"gpu_count", gpus}};
  if (!host.empty()) j["host"] = host;
  return j;
}

TEST(EngineSeam, ACreateAsksEachHostEachQuestionOnce) {
  FakeLab lab({{"lab1", 2}, {"lab2", 4}, {"lab3", 2}});
  LabClient c(lab, "");
  for (const char* h : {"lab1", "lab2", "lab3"}) lab.engine(h).reset_calls();
  auto r = c.post_json(kApi + "/create", create_body("one", 1));
  ASSERT_TRUE(ok(r)) << r.body;
  int made = 0;
  for (const char* h : {"lab1", "lab2", "lab3"}) {
    FakeEngine& e = lab.engine(h);
    std::printf("%s: image_exists %d, inspect_container %d, gpus_held_outside %d\n", h,
                e.calls("image_exists"), e.calls("inspect_container"),
                e.calls("gpus_held_outside"));
    EXPECT_EQ(e.calls("image_exists"), 1) << h;
    EXPECT_EQ(e.calls("inspect_container"), 1) << h;  // is the name free there
    EXPECT_EQ(e.calls("gpus_held_outside"), 1) << h;  // asked only for a GPU create
    made += e.calls("run_container");
  }
  EXPECT_EQ(made, 1);

  // The asked host alone is asked about the image; an unknown one is named with the lab's hosts.
  for (const char* h : {"lab1", "lab2", "lab3"}) lab.engine(h).reset_calls();
  ASSERT_TRUE(ok(c.post_json(kApi + "/create", create_body("two", 0, "lab3"))));
  EXPECT_EQ(lab.engine("lab3").calls("image_exists"), 1);
  EXPECT_EQ(lab.engine("lab1").calls("image_exists"), 0);
  auto unknown = c.post_json(kApi + "/create", create_body("three", 0, "nosuch"));
  EXPECT_EQ(code(unknown), "INVALID_REQUEST") << unknown.body;
  EXPECT_NE(unknown.body.find("lab1, lab2, lab3"), std::string::npos) << unknown.body;
  auto bad_name = c.post_json(kApi + "/create", create_body("a/b", 0));
  EXPECT_EQ(code(bad_name), "INVALID_REQUEST") << bad_name.body;
}

TEST(EngineSeam, PlacementPacksOrSpreadsAndSkipsHostsWithoutTheImage) {
  FakeLab pack({{"small", 2}, {"big", 4}});
  LabClient c(pack, "");
  // pack: the fullest host that fits; a 1-GPU container goes to the 2-GPU host first.
  ASSERT_TRUE(ok(c.post_json(kApi + "/create", create_body("p1", 1))));
  EXPECT_EQ(pack.service().store->find_container("p1")->host, "small");
  // 3 GPUs fit only on big.
  ASSERT_TRUE(ok(c.post_json(kApi + "/create", create_body("p2", 3))));
  EXPECT_EQ(pack.service().store->find_container("p2")->host, "big");
  auto none = c.post_json(kApi + "/create", create_body("p3", 2));
  EXPECT_EQ(code(none), "GPU_ALLOCATION_FAILED") << none.body;
  EXPECT_EQ(pack.engine_container_count("p"), 2);  // the refused one left nothing

  FakeLab spread({{"small", 2}, {"big", 4}},
                 [](ServiceConfig& cfg) { cfg.allocation_policy = "spread"; });
  LabClient s(spread, "");
  ASSERT_TRUE(ok(s.post_json(kApi + "/create", create_body("s1", 1))));
  EXPECT_EQ(spread.service().store->find_container("s1")->host, "big");
  // A host without the image is never chosen, however empty.
  ASSERT_TRUE(spread.engine("big").remove_image(kFakeImage).ok());
  ASSERT_TRUE(ok(s.post_json(kApi + "/create", create_body("s2", 1))));
  EXPECT_EQ(spread.service().store->find_container("s2")->host, "small");
}

TEST(EngineSeam, GpusHeldOutsideTheServiceAreNotHandedOut) {
  FakeLab lab({{"", 2}});
  lab.engine().set_held_outside({"GPU-local-0"});
  LabClient c(lab, "");
  ASSERT_TRUE(ok(c.post_json(kApi + "/create", create_body("g1", 1))));
  auto row = lab.service().store->find_container("g1");
  ASSERT_EQ(row->gpus.size(), 1u);
  EXPECT_EQ(row->gpus[0].uuid, "GPU-local-1");
  EXPECT_EQ(code(c.post_json(kApi + "/create", create_body("g2", 1))), "GPU_ALLOCATION_FAILED");
}

TEST(EngineSeam, ABackendWithoutSnapshotsSaysSoAndChangesNothing) {
  FakeLab lab({{"plain", 2, /*archives=*/false}, {"full", 2}});
  LabClient c(lab, "");
  ASSERT_TRUE(ok(c.post_json(kApi + "/create", create_body("box", 1, "plain"))));
  auto snap = c.post_json(kApi + "/snapshot", {{"name", "box"}, {"snapshot_name", "keep"}});
  EXPECT_EQ(code(snap), "UNSUPPORTED") << snap.body;
  EXPECT_NE(snap.body.find("fake://plain"), std::string::npos) << snap.body;
  EXPECT_FALSE(lab.service().store->find_snapshot("keep"));
  // A GPU count change (commit -> recreate) is refused before the book changes.
  auto grow = c.post_json(kApi + "/update-resources", {{"name", "box"}, {"gpu_count", 2}});
  EXPECT_EQ(code(grow), "UNSUPPORTED") << grow.body;
  EXPECT_EQ(lab.service().store->find_container("box")->gpus.size(), 1u);
  // The same on a backend that has them works.
  ASSERT_TRUE(ok(c.post_json(kApi + "/create", create_body("box2", 1, "full"))));
  auto snap2 = c.post_json(kApi + "/snapshot", {{"name", "box2"}, {"snapshot_name", "keep2"}});
  EXPECT_TRUE(ok(snap2)) << snap2.body;
}

TEST(EngineSeam, TheReconcilerReleasesWhatAContainerGoneFromItsEngineHeld) {
  FakeLab lab({{"", 2}});
  LabClient c(lab, "");
  ASSERT_TRUE(ok(c.post_json(kApi + "/create", create_body("gone", 2))));
  ASSERT_TRUE(lab.engine().remove_container("gone").ok());  // behind the service's back
  ReconcileReport rep = reconcile(lab.service(), false);
  EXPECT_EQ(rep.released, 1) << rep.to_json().dump();
  EXPECT_FALSE(lab.service().store->find_container("gone"));
  EXPECT_TRUE(ok(c.post_json(kApi + "/create", create_body("next", 2))));  // its GPUs are free
}

TEST(EngineSeam, AHostMarkedDownOrUnresponsiveAbandonsItsStalledCalls) {
  FakeLab lab({{"lab1", 1}, {"lab2", 1}});
  Host* lab1 = lab.service().find_host("lab1");
  Host* lab2 = lab.service().find_host("lab2");
  ASSERT_TRUE(lab1 && lab2);
  lab.engine("lab2").set_down(true);
  lab2->check();  // its ping fails: down
  EXPECT_FALSE(lab2->up());
  EXPECT_GE(lab.engine("lab2").calls("abandon_stalled_calls"), 1);
  EXPECT_EQ(lab.engine("lab1").calls("abandon_stalled_calls"), 0);  // an up host's calls go on
  lab1->mark_unresponsive("a call found no answer within 2 s");
  EXPECT_GE(lab.engine("lab1").calls("abandon_stalled_calls"), 1);
}

}  // namespace
}  // namespace gpulab::service::testing
