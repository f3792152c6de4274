// The book: migrations, WAL, unique GPU and port allocations (even across two connections),
// port rest, cascade on delete, tokens stored hashed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "service/base/crypto.h"
#include "service/http/auth.h"
#include "service/store/store.h"
#include "support/temp_dir.h"

namespace gpulab::service {
namespace {

using gpulab::testing::TempDir;

ContainerRecord rec(const std::string& name) {
  ContainerRecord r;
  r.name = name;
  r.owner = "alice";
  r.state = state::kCreating;
  r.spec.image = "busybox:latest";
  r.spec.gpu_count = 1;
  r.ssh_port = 2211;
  return r;
}

TEST(Store, MigratesAndUsesWal) {
  TempDir d;
  auto s = Store::open((d.path / "a.db").string());
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ((*s)->schema_version(), 5);  // 2: quotas, idle reclaim, metering; 3: hosts; 4: moves;
  // 5: ports an engine refused
  EXPECT_EQ((*s)->db().query("PRAGMA journal_mode")[0].str(0), "wal");
  // Opening again does not re-run migrations.
  auto again = Store::open((d.path / "a.db").string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->schema_version(), 5);
}

// A book from before hosts (version 2) keeps its rows: they belong to the first host, and host
// ports become unique per host.
TEST(Store, HostsMigrationKeepsAnOlderBook) {
  TempDir d;
  std::string path = (d.path / "old.db").string();
  {
    auto db = Db::open(path);
    ASSERT_TRUE(db.ok());
    // The version-2 shape of the tables migration 3 changes.
    (*db)->exec(
        "CREATE TABLE containers(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, owner TEXT "
        "NOT NULL, state TEXT NOT NULL, docker_id TEXT NOT NULL DEFAULT '', spec TEXT NOT NULL, "
        "ssh_port INTEGER NOT NULL DEFAULT 0, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)");
    (*db)->exec(
        "CREATE TABLE port_allocations(port INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
        "container_port INTEGER NOT NULL, container_id INTEGER NOT NULL REFERENCES "
        "containers(id) ON DELETE CASCADE)");
    (*db)->exec("CREATE TABLE port_rest(port INTEGER PRIMARY KEY, released_at REAL NOT NULL)");
    (*db)->exec(
        "CREATE TABLE gpu_allocations(gpu_uuid TEXT PRIMARY KEY, gpu_index INTEGER NOT NULL, "
        "container_id INTEGER NOT NULL REFERENCES containers(id) ON DELETE CASCADE, "
        "allocated_at TEXT NOT NULL)");
    (*db)->exec(
        "INSERT INTO containers(id,name,owner,state,spec,ssh_port,created_at,updated_at) "
        "VALUES(1,'old','alice','running','{\"image\":\"busybox\"}',2211,'t','t')");
    (*db)->exec("INSERT INTO port_allocations VALUES(2211,'ssh',22,1)");
    (*db)->exec("INSERT INTO port_rest VALUES(2222,1e12)");
    (*db)->exec("PRAGMA user_version=2");
  }
  auto s = Store::open(path);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ((*s)->schema_version(), 5);
  (*s)->adopt_default_host("gpu1");
  auto c = (*s)->find_container("old");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->host, "gpu1");
  EXPECT_EQ((*s)->port_holders("gpu1").at(2211), "old");
  EXPECT_TRUE((*s)->port_holders("gpu2").empty());
  EXPECT_TRUE((*s)->unavailable_ports(30, "gpu1").count(2222));  // still resting there

  // The same port on another host is free; twice on one host is refused by the key.
  ContainerRecord r = rec("new");
  r.host = "gpu2";
  auto id = (*s)->insert_container(r);
  (*s)->add_port(id, 2211, "ssh", 22);
  EXPECT_EQ((*s)->port_holders("gpu2").at(2211), "new");
  ContainerRecord r2 = rec("dup");
  r2.host = "gpu2";
  auto id2 = (*s)->insert_container(r2);
  EXPECT_THROW((*s)->add_port(id2, 2211, "ssh", 22), Exception);
}

TEST(Store, GpuAndPortAreUniqueAcrossConnections) {
  TempDir d;
  auto a = Store::open((d.path / "b.db").string());
  auto b = Store::open((d.path / "b.db").string());
  ASSERT_TRUE(a.ok() && b.ok());
  auto id1 = (*a)->insert_container(rec("one"));
  auto id2 = (*b)->insert_container(rec("two"));
  (*a)->add_gpu(id1, {"GPU-0", 0});
  EXPECT_THROW((*b)->add_gpu(id2, {"GPU-0", 0}), Exception);
  (*a)->add_port(id1, 2211, "ssh", 22);
  EXPECT_THROW((*b)->add_port(id2, 2211, "ssh", 22), Exception);
  EXPECT_THROW((*b)->insert_container(rec("one")), Exception);  // name taken
  auto holders = (*b)->gpu_holders();
  EXPECT_EQ(holders.at("GPU-0"), "one");
}

TEST(Store, TransactionRollsBackEverything) {
  TempDir d;
  auto s = Store::open((d.path / "c.db").string());
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  EXPECT_THROW(st.transaction([&] {
    auto id = st.insert_container(rec("x"));
    st.add_gpu(id, {"GPU-1", 1});
    throw Exception(Code::kResourceExhausted, "no port");
  }),
               Exception);
  EXPECT_FALSE(st.find_container("x"));
  EXPECT_TRUE(st.gpu_holders().empty());
}

TEST(Store, DeleteReleasesGpusAndRestsPorts) {
  TempDir d;
  auto s = Store::open((d.path / "d.db").string());
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  auto id = st.insert_container(rec("y"));
  st.add_gpu(id, {"GPU-2", 2});
  st.add_port(id, 2211, "ssh", 22);
  st.add_port(id, 3002, "user", 3002);
  st.remove_container(id, true);
  EXPECT_TRUE(st.gpu_holders().empty());
  EXPECT_TRUE(st.port_holders().empty());
  auto resting = st.unavailable_ports(60);
  EXPECT_TRUE(resting.count(2211) && resting.count(3002));
  EXPECT_TRUE(st.unavailable_ports(0).empty());  // rest over
}

// A move's target booking is pending until the commit: taken for the allocator, not the
// container's; the commit swaps the two sets in one step (the source's ports rest), a rollback
// drops the pending ones.
TEST(Store, MoveBooksTheTargetPendingThenCommitsOrDrops) {
  TempDir d;
  auto s = Store::open((d.path / "m.db").string());
  ASSERT_TRUE(s.ok());
  Store& st = **s;
  ContainerRecord r = rec("mv");
  r.host = "a";
  auto id = st.insert_container(r);
  st.add_gpu(id, {"GPU-a0", 0});
  st.add_port(id, 2211, "ssh", 22);
  MoveRecord m;
  m.tag = "mv-1";
  m.container_id = id;
  m.name = "mv";
  m.source_host = "a";
  m.target_host = "b";
  m.prev_state = state::kExited;
  m.state = "copying";
  st.transaction([&] {
    st.add_pending_gpu(id, {"GPU-b1", 1});
    st.add_pending_port(id, "b", 2211, "ssh", 22);  // the same number: ports are per host
    st.insert_move(m);
  });
  EXPECT_EQ(st.find_container(id)->gpu_uuids(), std::vector<std::string>{"GPU-a0"});
  EXPECT_EQ(st.gpu_holders().size(), 2u);  // both taken for the allocator
  EXPECT_TRUE(st.unavailable_ports(0, "b").count(2211));
  ASSERT_EQ(st.moves().size(), 1u);
  EXPECT_EQ(st.moves()[0].target_host, "b");

  st.drop_pending(id);  // a rollback
  EXPECT_EQ(st.gpu_holders().size(), 1u);
  EXPECT_TRUE(st.unavailable_ports(0, "b").empty());

  st.add_pending_gpu(id, {"GPU-b1", 1});
  st.add_pending_port(id, "b", 2222, "ssh", 22);
  ContainerSpec spec = r.spec;
  spec.image = "gpulab-move:mv-1";
  st.commit_move(m, "new-id", spec, 2222, state::kCreated);
  auto after = st.find_container(id);
  EXPECT_EQ(after->host, "b");
  EXPECT_EQ(after->docker_id, "new-id");
  EXPECT_EQ(after->ssh_port, 2222);
  EXPECT_EQ(after->spec.image, "gpulab-move:mv-1");
  EXPECT_EQ(after->gpu_uuids(), std::vector<std::string>{"GPU-b1"});
  EXPECT_EQ(st.port_holders("b").count(2222), 1u);
  EXPECT_TRUE(st.port_holders("a").empty());
  EXPECT_TRUE(st.unavailable_ports(60, "a").count(2211));  // the source's port rests
  EXPECT_EQ(st.moves()[0].state, "finish");
  st.remove_move("mv-1");
  EXPECT_TRUE(st.moves().empty());
}

TEST(Store, TokensAreStoredHashed) {
  TempDir d;
  auto s = Store::open((d.path / "e.db").string());
  ASSERT_TRUE(s.ok());
  Auth auth(**s, true);
  std::string token = auth.issue_token("bob", false);
  auto rows = (*s)->db().query("SELECT token_sha256 FROM tokens");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NE(rows[0].str(0), token);
  EXPECT_EQ(rows[0].str(0), sha256_hex(token));
  EXPECT_EQ(auth.authenticate("Bearer " + token).user, "bob");
  EXPECT_FALSE(auth.authenticate("Bearer " + token).admin);
  EXPECT_THROW(auth.authenticate("Bearer wrong"), Exception);
  EXPECT_THROW(auth.authenticate(""), Exception);
  EXPECT_THROW(auth.authenticate("Basic abc"), Exception);
  Auth open_auth(**s, false);
  // Loopback without tokens is the local admin only while no user exists; bob exists here.
  EXPECT_THROW(open_auth.authenticate(""), Exception);
  TempDir d2;
  auto empty = Store::open((d2.path / "f.db").string());
  ASSERT_TRUE(empty.ok());
  Auth fresh(**empty, false);
  EXPECT_TRUE(fresh.authenticate("").admin);
  EXPECT_THROW(open_auth.authenticate("Bearer wrong"), Exception);  // a wrong token never passes
}

TEST(Crypto, Sha256KnownAnswer) {
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 h;
  h.update("a");
  h.update("bc");
  EXPECT_EQ(h.hex(), sha256_hex("abc"));
  auto s = random_secret(32);
  EXPECT_EQ(s.size(), 32u);
  EXPECT_NE(s, random_secret(32));
}

}  // namespace
}  // namespace gpulab::service
