// Counts that agree, on three fake hosts (fake_lab.h; lab1 2 GPUs, lab2 4, lab3 2: counting needs
// no Docker engine): with every GPU held but one on lab3, the create's "N free", status (index
// lists and host-qualified ids), gpus, the per-host status and /metrics all say 1 while lab3 is up
// and 0 once its engine stops answering (its free GPU is then "unoffered", never "available"); the
// create answer names its host and that host's state.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "fake_lab.h"

namespace gpulab::service::testing {
namespace {

class HostsCounts : public ::testing::Test {
 protected:
  HttpResult create(const LabClient& c, const std::string& name, int gpus,
                    const std::string& host = {}) {
    Json body = {{"name", name}, {"image", kFakeImage}, {"gpu_count", gpus}};
    if (!host.empty()) body["host"] = host;
    return c.post_json(kApi + "/create", body);
  }

  // gpulab_gpus_available{host="<host>"} from /metrics; -1 when absent.
  static int metric_available(const std::string& metrics, const std::string& host) {
    const std::string key = "gpulab_gpus_available{host=\"" + host + "\"} ";
    auto at = metrics.find(key);
    return at == std::string::npos ? -1 : std::stoi(metrics.substr(at + key.size()));
  }

  // Every view's count of GPUs a create can get now, and which are offered on lab3.
  struct Views {
    size_t status_indices = 0, status_ids = 0, gpus_offered_free = 0, host3_available = 0;
    int metrics_lab3 = -1, metrics_total = 0;
    Json unoffered;
  };
  Views views(const LabClient& c) {
    Views v;
    auto status = c.get(kApi + "/status").json()["data"];
    v.status_indices = status["available_gpu_indices"].size();
    v.status_ids = status["available_gpus"].size();
    v.unoffered = status["unoffered_gpus"];
    for (const auto& h : status["hosts"])
      if (h["name"] == "lab3") v.host3_available = h["available_gpu_indices"].size();
    const Json gpus = c.get(kApi + "/gpus").json();  // held: the loop reads inside it
    for (const auto& g : gpus["data"]["gpus"])
      if (!g["allocated"].get<bool>() && g.value("offered", false)) ++v.gpus_offered_free;
    const std::string m = c.get("/metrics").body;
    v.metrics_lab3 = metric_available(m, "lab3");
    for (const char* h : {"lab1", "lab2", "lab3"}) v.metrics_total += metric_available(m, h);
    return v;
  }
};

TEST_F(HostsCounts, ADownHostsFreeGpusAreNotOfferedAndEveryViewAgrees) {
  FakeLab lab({{"lab1", 2}, {"lab2", 4}, {"lab3", 2}});
  LabClient c(lab, "");
  for (const auto& [name, gpus, host] : std::vector<std::tuple<std::string, int, std::string>>{
           {"c1", 2, "lab1"}, {"c2", 4, "lab2"}, {"c3", 1, "lab3"}}) {
    auto r = create(c, name, gpus, host);
    ASSERT_TRUE(ok(r)) << r.body;
    EXPECT_EQ(r.json()["data"]["host"], host) << r.body;
    EXPECT_EQ(r.json()["data"]["host_state"], "up") << r.body;
  }
  // Host-qualified ids tell the hosts' GPUs apart (indices alone repeat 0, 1, ... per host).
  auto status = c.get(kApi + "/status").json()["data"];
  std::set<std::string> ids;
  for (const char* k : {"available_gpus", "used_gpus", "unoffered_gpus"})
    for (const auto& id : status[k]) ids.insert(id.get<std::string>());
  EXPECT_EQ(ids.size(), 8u) << status.dump();
  EXPECT_TRUE(ids.count("lab2:3")) << status.dump();

  Views up = views(c);
  EXPECT_EQ(up.status_indices, 1u);
  EXPECT_EQ(up.status_ids, 1u);
  EXPECT_EQ(up.gpus_offered_free, 1u);
  EXPECT_EQ(up.host3_available, 1u);
  EXPECT_EQ(up.metrics_lab3, 1);
  EXPECT_EQ(up.metrics_total, 1);
  EXPECT_TRUE(up.unoffered.empty()) << up.unoffered.dump();
  auto two = create(c, "two", 2);
  EXPECT_EQ(code(two), "GPU_ALLOCATION_FAILED") << two.body;
  EXPECT_NE(two.body.find("1 free"), std::string::npos) << two.body;

  // lab3's engine stops answering; the host monitor's next check marks it down.
  lab.engine("lab3").set_down(true);
  Host* lab3 = lab.service().find_host("lab3");
  ASSERT_TRUE(lab3->check());
  ASSERT_EQ(lab3->state(), "down");

  Views down = views(c);
  EXPECT_EQ(down.status_indices, 0u);
  EXPECT_EQ(down.status_ids, 0u);
  EXPECT_EQ(down.gpus_offered_free, 0u);
  EXPECT_EQ(down.host3_available, 0u);
  EXPECT_EQ(down.metrics_lab3, 0);
  EXPECT_EQ(down.metrics_total, 0);
  ASSERT_EQ(down.unoffered.size(), 1u) << down.unoffered.dump();
  EXPECT_EQ(down.unoffered[0].get<std::string>().rfind("lab3:", 0), 0u) << down.unoffered.dump();
  auto one = create(c, "one", 1);
  EXPECT_EQ(code(one), "GPU_ALLOCATION_FAILED") << one.body;
  EXPECT_NE(one.body.find("0 free"), std::string::npos) << one.body;
}

}  // namespace
}  // namespace gpulab::service::testing
