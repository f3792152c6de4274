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
  EXPECT_EQ((*s)->schema_version(), 2);  // 2: quotas, idle policies and GPU-second metering
  EXPECT_EQ((*s)->db().query("PRAGMA journal_mode")[0].str(0), "wal");
  // Opening again does not re-run migrations.
  auto again = Store::open((d.path / "a.db").string());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->schema_version(), 2);
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
