// SSH access to lab containers (issue 6) and token revocation, against a real dockerd and a real
// ssh client: a public key given at create logs in; the generated password never shows in the
// engine's inspect output and survives a restart; the container stops on SIGTERM; a revoked token
// gets 401.
#include <gtest/gtest.h>

#include <thread>

#include "core/files.h"
#include "core/subprocess.h"
#include "service_env.h"

namespace gpulab::service::testing {
namespace {

class ServiceSsh : public ServiceTest {};

std::vector<std::string> ssh_argv(int port, const std::vector<std::string>& extra,
                                  const std::string& command) {
  std::vector<std::string> v = {"ssh",
                                "-o",
                                "StrictHostKeyChecking=no",
                                "-o",
                                "UserKnownHostsFile=/dev/null",
                                "-o",
                                "ConnectTimeout=5",
                                "-o",
                                "LogLevel=ERROR",
                                "-p",
                                std::to_string(port)};
  v.insert(v.end(), extra.begin(), extra.end());
  v.push_back("root@127.0.0.1");
  v.push_back(command);
  return v;
}

// Retries while sshd in the container comes up; the last result.
ProcessResult ssh_until_ok(const std::vector<std::string>& argv) {
  ProcessResult last;
  for (int attempt = 0; attempt < 30; ++attempt) {
    auto p = run_process(argv);
    if (!p.ok()) break;
    last = *p;
    if (last.success()) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return last;
}

TEST_F(ServiceSsh, PublicKeyGivenAtCreateLogsIn) {
  if (!which("ssh") || !which("ssh-keygen") || !which("sshpass"))
    GTEST_SKIP() << "needs ssh, ssh-keygen and sshpass";
  start_service(four_gpu_config(engine_->host, unique_port_base()), true);
  if (HasFatalFailure() || IsSkipped()) return;
  auto key = dir_ / "id_ed25519";
  auto kg = run_process(
      {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpulab-test", "-f", key.string()});
  ASSERT_TRUE(kg.ok() && kg->success()) << (kg.ok() ? kg->err : kg.error().message);
  auto pub = read_file(key.string() + ".pub");
  ASSERT_TRUE(pub.ok());
  std::string pubkey = *pub;
  while (!pubkey.empty() && (pubkey.back() == '\n' || pubkey.back() == '\r')) pubkey.pop_back();

  HttpClient c(svc_->url());
  std::string name = prefix_ + "-key";
  auto r = c.post_json(
      "/api/v1/gpu-docker/create",
      {{"name", name}, {"image", kSshImage}, {"gpu_count", 0}, {"ssh_public_key", pubkey}});
  ASSERT_TRUE(ok(r)) << r.body;
  EXPECT_FALSE(r.json()["data"].contains("ssh_password")) << r.body;  // a key: no password
  int port = r.json()["data"]["ssh_port"];
  auto login = ssh_until_ok(
      ssh_argv(port, {"-i", key.string(), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"},
               "echo key-login-ok $(hostname) $(whoami)"));
  ASSERT_TRUE(login.success()) << login.err;
  EXPECT_NE(login.out.find("key-login-ok " + name + " root"), std::string::npos) << login.out;
  // Without the key nothing gets in: no password login at all on a key container.
  auto pw = run_process([&] {
    auto v = ssh_argv(port, {"-o", "PubkeyAuthentication=no"}, "true");
    v.insert(v.begin(), {"sshpass", "-p", "root"});
    return v;
  }());
  ASSERT_TRUE(pw.ok());
  EXPECT_FALSE(pw->success());
  auto other = dir_ / "other_key";
  ASSERT_TRUE(run_process({"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other.string()})
                  ->success());
  auto wrong = run_process(ssh_argv(
      port, {"-i", other.string(), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes"}, "true"));
  ASSERT_TRUE(wrong.ok());
  EXPECT_FALSE(wrong->success());
}

TEST_F(ServiceSsh, PasswordNeverShowsInInspectAndSurvivesRestart) {
  if (!which("ssh") || !which("sshpass")) GTEST_SKIP() << "needs ssh and sshpass";
  start_service(four_gpu_config(engine_->host, unique_port_base()), true);
  if (HasFatalFailure() || IsSkipped()) return;
  HttpClient c(svc_->url());
  std::string name = prefix_ + "-pw";
  auto r = c.post_json("/api/v1/gpu-docker/create",
                       {{"name", name}, {"image", kSshImage}, {"gpu_count", 1}});
  ASSERT_TRUE(ok(r)) << r.body;
  std::string pw = r.json()["data"]["ssh_password"];
  int port = r.json()["data"]["ssh_port"];
  ASSERT_GE(pw.size(), 16u);
  auto with_pw = [&](const std::string& cmd) {
    auto v = ssh_argv(port, {"-o", "PubkeyAuthentication=no"}, cmd);
    v.insert(v.begin(), {"sshpass", "-p", pw});
    return v;
  };
  auto login =
      ssh_until_ok(with_pw("test -e /run/gpulab/ssh_password && echo file-left || echo file-gone"));
  ASSERT_TRUE(login.success()) << login.err;
  EXPECT_NE(login.out.find("file-gone"), std::string::npos) << login.out;  // applied, deleted
  // The engine's whole inspect answer (env, labels, args) does not hold the password.
  auto info = client_->inspect_container(name);
  ASSERT_TRUE(info.ok());
  std::string dump = info->raw.dump();
  EXPECT_EQ(dump.find(pw), std::string::npos);
  EXPECT_EQ(dump.find("GPULAB_SSH_PASSWORD"), std::string::npos);
  EXPECT_NE(dump.find("GPULAB_SSH_PUBKEY"), std::string::npos);  // (the env is there)
  // A restart keeps the password login (the file is gone; /etc/shadow has it).
  ASSERT_TRUE(ok(c.post_json("/api/v1/gpu-docker/restart", {{"name", name}})));
  auto again = ssh_until_ok(with_pw("echo after-restart"));
  ASSERT_TRUE(again.success()) << again.err;
  EXPECT_NE(again.out.find("after-restart"), std::string::npos);
  // The entrypoint ends on the engine's SIGTERM (exit 0): one that ignores it (PID 1 has no
  // default signal actions) makes every stop and restart wait the whole stop timeout, then
  // ends in SIGKILL (137).
  ASSERT_TRUE(ok(c.post_json("/api/v1/gpu-docker/stop", {{"name", name}})));
  auto stopped = client_->inspect_container(name);
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->raw["State"]["ExitCode"], 0) << stopped->raw["State"].dump();
}

TEST_F(ServiceSsh, AdminIssuesAndRevokesTokens) {
  Json cfg = four_gpu_config(engine_->host, unique_port_base());
  cfg["auth_required"] = true;
  start_service(cfg);
  if (HasFatalFailure() || IsSkipped()) return;
  const std::string& api = kApi;
  std::string admin_token = svc_->add_user("root-admin", true);
  ASSERT_FALSE(admin_token.empty());
  HttpClient admin(svc_->url(), admin_token);
  // An admin makes a user and two tokens through the API; a user may not make users.
  auto t1 = admin.post_json(api + "/users", {{"name", "carol"}});
  ASSERT_TRUE(ok(t1)) << t1.body;
  std::string tok1 = t1.json()["data"]["token"],
              tok2 = admin.post_json(api + "/users", {{"name", "carol"}}).json()["data"]["token"];
  ASSERT_NE(tok1, tok2);
  HttpClient carol1(svc_->url(), tok1), carol2(svc_->url(), tok2);
  EXPECT_TRUE(ok(carol1.get(api + "/list")));
  EXPECT_EQ(code(carol1.post_json(api + "/users", {{"name", "mallory"}, {"admin", true}})),
            "FORBIDDEN");
  EXPECT_EQ(code(carol1.post_json(api + "/users/revoke", {{"token", tok2}})), "FORBIDDEN");
  // Only hashes are stored.
  for (const std::string suffix : {"", "-wal"}) {
    auto db = read_file(svc_->db_path().string() + suffix);
    if (db.ok()) {
      EXPECT_EQ(db->find(tok1), std::string::npos) << suffix;
    }
  }
  // Revoke one token: it gets 401 with the error envelope, the other still works.
  ASSERT_TRUE(ok(admin.post_json(api + "/users/revoke", {{"token", tok1}})));
  auto denied = carol1.get(api + "/list");
  EXPECT_EQ(denied.status, 401);
  EXPECT_EQ(denied.json()["success"], false);
  EXPECT_EQ(code(denied), "UNAUTHORIZED");
  EXPECT_TRUE(denied.json().contains("message"));
  EXPECT_TRUE(ok(carol2.get(api + "/list")));
  EXPECT_EQ(code(admin.post_json(api + "/users/revoke", {{"token", tok1}})), "NOT_FOUND");
  EXPECT_EQ(code(admin.post_json(api + "/users/revoke", {})), "INVALID_REQUEST");
  // The CLI revokes all of a user's tokens (offline, on the same database).
  auto cli = run_process(
      {GPULAB_BINARY, "serve", "--db", svc_->db_path().string(), "--revoke-user", "carol"});
  ASSERT_TRUE(cli.ok());
  EXPECT_TRUE(cli->success()) << cli->err;
  EXPECT_NE(cli->out.find("revoked 1 token(s) of carol"), std::string::npos) << cli->out;
  EXPECT_EQ(carol2.get(api + "/list").status, 401);
  EXPECT_TRUE(ok(admin.get(api + "/list")));
}

}  // namespace
}  // namespace gpulab::service::testing
