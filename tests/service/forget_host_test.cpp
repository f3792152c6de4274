// Forgetting a host on the book alone (no engine is asked, so none is needed): a dry run changes
// nothing; the real one removes the host's containers and leases with their GPUs and ports, its
// resting ports, and the move journal rows naming it (a container elsewhere moving to it gets its
// state back and loses its pending booking there), and leaves every other host's rows as they were.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "service/base/api_error.h"
#include "service/ops/hosts/forget_host.h"
#include "support/temp_dir.h"

namespace gpulab::service {
namespace {

using gpulab::testing::TempDir;

ContainerRecord row(const std::string& name, const std::string& host, const std::string& st,
                    const std::string& owner = "alice") {
  ContainerRecord r;
  r.name = name;
  r.owner = owner;
  r.state = st;
  r.host = host;
  r.spec.image = "busybox:latest";
  r.spec.gpu_count = 1;
  return r;
}

MoveRecord move(const std::string& tag, std::int64_t id, const std::string& name,
                const std::string& from, const std::string& to, const std::string& st) {
  MoveRecord m;
  m.tag = tag;
  m.container_id = id;
  m.name = name;
  m.source_host = from;
  m.target_host = to;
  m.prev_state = state::kExited;
  m.state = st;
  return m;
}

ApiCode refusal(Service& s, const std::string& host) {
  try {
    forget_host(s, host, false, "boss");
  } catch (const ApiError& e) {
    return e.api_code();
  }
  return ApiCode::kInternalError;  // not refused
}

// The service has no hosts here, so every host is one "the config no longer lists".
class ForgetHost : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::open((dir_.path / "book.db").string());
    ASSERT_TRUE(store.ok()) << store.error().to_string();
    s_.store = std::move(*store);
    Store& st = *s_.store;
    auto old = st.insert_container(row("old", "lab3", state::kRunning));
    st.add_gpu(old, {"GPU-lab3-0", 0});
    st.add_port(old, 7211, "ssh", 22);
    st.add_port(old, 7005, "user", 7005);
    auto lease = st.insert_container(row("ls", "lab3", state::kLeased, "bob"));
    st.add_port(lease, 7222, "ssh", 22);
    auto gone = st.insert_container(row("gone", "lab3", state::kExited));
    st.add_port(gone, 7244, "ssh", 22);
    st.remove_container(gone, true);  // 7244 rests on lab3
    auto mv = st.insert_container(row("mv", "lab1", state::kMoving));
    st.add_gpu(mv, {"GPU-lab1-0", 0});
    st.add_port(mv, 7211, "ssh", 22);
    st.add_pending_gpu(mv, {"GPU-lab3-1", 1});
    st.add_pending_port(mv, "lab3", 7233, "ssh", 22);
    st.insert_move(move("mv-1", mv, "mv", "lab1", "lab3", "copying"));
    auto fin = st.insert_container(row("fin", "lab2", state::kCreated));
    st.add_gpu(fin, {"GPU-lab2-0", 0});
    st.insert_move(move("fin-1", fin, "fin", "lab3", "lab2", "finish"));
    auto rests = st.insert_container(row("rests", "lab1", state::kExited));
    st.add_port(rests, 7255, "ssh", 22);
    st.remove_container(rests, true);  // 7255 rests on lab1
  }

  TempDir dir_;
  Service s_;
};

TEST_F(ForgetHost, ADryRunSaysWhatGoesAndChangesNothing) {
  ForgetReport r = forget_host(s_, "lab3", true, "boss");
  std::set<std::string> names, gpus;
  for (const auto& c : r.containers) names.insert(c.name);
  for (const auto& g : r.gpus) gpus.insert(g.uuid);
  EXPECT_EQ(names, (std::set<std::string>{"old", "ls"}));
  EXPECT_EQ(gpus, (std::set<std::string>{"GPU-lab3-0", "GPU-lab3-1"}));  // mv's pending one too
  EXPECT_EQ(r.ports, (std::vector<std::pair<std::string, int>>{
                         {"lab3", 7005}, {"lab3", 7211}, {"lab3", 7222}, {"lab3", 7233}}));
  EXPECT_EQ(r.moves.size(), 2u);
  EXPECT_EQ(r.to_json()["by_user"]["bob"], Json::array({"ls"}));
  EXPECT_EQ(s_.store->containers().size(), 4u);
  EXPECT_EQ(s_.store->moves().size(), 2u);
  EXPECT_EQ(s_.store->gpu_holders().size(), 4u);
  EXPECT_TRUE(s_.store->audit_tail(10).empty());
}

TEST_F(ForgetHost, ForgettingReleasesTheHostsRowsAndSettlesItsMoves) {
  Store& st = *s_.store;
  forget_host(s_, "lab3", false, "boss");
  std::set<std::string> left;
  for (const auto& c : st.containers()) left.insert(c.name);
  EXPECT_EQ(left, (std::set<std::string>{"mv", "fin"}));
  EXPECT_EQ(st.find_container("mv")->state, state::kExited);  // its move to lab3 rolled back
  EXPECT_EQ(st.gpu_holders(),
            (std::map<std::string, std::string>{{"GPU-lab1-0", "mv"}, {"GPU-lab2-0", "fin"}}));
  EXPECT_TRUE(st.unavailable_ports(3600, "lab3").empty());  // held, pending and resting
  EXPECT_EQ(st.unavailable_ports(3600, "lab1"), (std::set<int>{7211, 7255}));
  EXPECT_TRUE(st.moves().empty());
  EXPECT_EQ(st.hosts_in_book(), (std::set<std::string>{"lab1", "lab2"}));
  std::multiset<std::string> audited;
  for (const auto& e : st.audit_tail(10))
    audited.insert(e["action"].get<std::string>() + " " + e["target"].get<std::string>());
  EXPECT_EQ(audited, (std::multiset<std::string>{"forget old", "forget ls", "forget-host lab3"}));
  // Nothing is left to forget; the other hosts' rows are theirs.
  EXPECT_EQ(refusal(s_, "lab3"), ApiCode::kNotFound);
  EXPECT_EQ(refusal(s_, "Lab3"), ApiCode::kInvalidRequest);
  EXPECT_EQ(refusal(s_, "-x"), ApiCode::kInvalidRequest);
}

// The admins' hosts view: every host the book names is retired here (the service has none), each
// with what forgetting it would let go of; reading it changes nothing, and a forgotten host drops
// out.
TEST_F(ForgetHost, TheRetiredHostsAreSurveyedWithoutChangingAnything) {
  std::map<std::string, Json> by_name;
  for (const auto& r : survey_retired_hosts(s_)) by_name[r.host] = r.summary_json();
  ASSERT_EQ(by_name.size(), 3u);
  const Json& lab3 = by_name["lab3"];
  EXPECT_EQ(lab3["containers"], 1) << lab3.dump();
  EXPECT_EQ(lab3["leases"], 1) << lab3.dump();
  EXPECT_EQ(lab3["gpus"], 2) << lab3.dump();  // old's and mv's pending one
  EXPECT_EQ(lab3["ports"], 4) << lab3.dump();
  EXPECT_EQ(lab3["moves"], 2) << lab3.dump();
  EXPECT_EQ(lab3["owners"], Json::array({"alice", "bob"}));
  EXPECT_EQ(s_.store->containers().size(), 4u);
  EXPECT_TRUE(s_.store->audit_tail(10).empty());

  forget_host(s_, "lab3", false, "boss");
  EXPECT_EQ(retired_hosts(s_), (std::vector<std::string>{"lab1", "lab2"}));
}

}  // namespace
}  // namespace gpulab::service
