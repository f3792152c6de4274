// `gpulab serve [--config FILE] [--listen ADDR:PORT] [--docker-host URL] [--db PATH]
// [--backup-dir DIR] [--ssh-port-base N] [--tls_cert PEM --tls_key PEM | --insecure_http]`: the
// GPU container REST service. Also issues and
// revokes API tokens (--add-user, --revoke-token, --revoke-user), sets quotas and idle policies
// (--set-quota, --set-idle-policy, --show-policies) and prints the OpenAPI document (--openapi),
// without serving.
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "service/app/server.h"
#include "service/base/config.h"

namespace gpulab::cli {

namespace {

struct ServeArgs {
  std::string config_file;
  std::string listen;
  std::string docker_host;
  std::string db;
  std::string backup_dir;
  int ssh_port_base = -1;
  std::string port_file;
  std::string tls_cert, tls_key;
  bool insecure_http = false;
  std::string add_user;
  bool admin = false;
  std::string revoke_token;
  std::string revoke_user;
  bool openapi = false;
  std::string set_quota, set_idle_policy;
  bool show_policies = false;
};

service::ServiceConfig build_config(const ServeArgs& a) {
  service::ServiceConfig c;
  if (!a.config_file.empty()) c = service::load_config(a.config_file).value_or_throw();
  // Flags override the file; the seed's SSH_PORT_BASE variable is honoured below the file.
  if (!a.listen.empty()) {
    auto st = service::parse_listen(a.listen, c);
    if (!st) throw Exception(st.error());
  }
  if (!a.docker_host.empty()) c.docker_host = a.docker_host;
  if (!a.db.empty()) c.db_path = a.db;
  if (!a.backup_dir.empty()) c.backup_dir = a.backup_dir;
  if (a.ssh_port_base >= 0) c.ssh_port_base = a.ssh_port_base;
  if (!a.tls_cert.empty()) c.tls_cert = a.tls_cert;
  if (!a.tls_key.empty()) c.tls_key = a.tls_key;
  if (a.insecure_http) c.insecure_http = true;
  return c;
}

void run(const ServeArgs& a) {
  service::ServiceConfig c = build_config(a);
  if (a.openapi) {
    std::fputs(service::openapi_json().c_str(), stdout);
    return;
  }
  if (!a.add_user.empty()) {
    std::string token = service::issue_token(c, a.add_user, a.admin);
    std::printf("%s\n", token.c_str());
    std::fprintf(stderr, "token for %s%s (shown once; the service keeps only its SHA-256)\n",
                 a.add_user.c_str(), a.admin ? " (admin)" : "");
    return;
  }
  if (!a.set_quota.empty() || !a.set_idle_policy.empty() || a.show_policies) {
    if (!a.set_quota.empty())
      std::printf("%s\n", service::set_policy_offline(c, true, a.set_quota).c_str());
    if (!a.set_idle_policy.empty())
      std::printf("%s\n", service::set_policy_offline(c, false, a.set_idle_policy).c_str());
    if (a.show_policies) std::printf("%s\n", service::show_policies_offline(c).c_str());
    return;
  }
  if (!a.revoke_token.empty() || !a.revoke_user.empty()) {
    int n = service::revoke_tokens(c, a.revoke_token, a.revoke_user);
    std::printf("revoked %d token(s)%s\n", n,
                a.revoke_user.empty() ? "" : (" of " + a.revoke_user).c_str());
    return;
  }
  service::ServeOptions o;
  o.port_file = a.port_file;
  service::serve(c, o);
}

}  // namespace

void add_serve_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd =
      app.add_subcommand("serve", "GPU container REST service (the GPU Docker Service API)");
  cmd->add_option("--config", args->config_file, "JSON config file (see docs/service.md)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--listen", args->listen, "ADDR:PORT to listen on (default 127.0.0.1:8000)");
  cmd->add_option(
      "--docker_host,--docker-host", args->docker_host,
      "engine URL: unix:///var/run/docker.sock or tcp://host:2376 (default $DOCKER_HOST)");
  cmd->add_option("--db", args->db, "SQLite database file (default /var/lib/gpulab/service.db)");
  cmd->add_option("--backup_dir,--backup-dir", args->backup_dir,
                  "where backup_<name>.tar files go (default /backups)");
  cmd->add_option("--ssh_port_base,--ssh-port-base", args->ssh_port_base,
                  "SSH ports are BASE+11, BASE+22, ... (default 2200)")
      ->envname("SSH_PORT_BASE")
      ->check(CLI::Range(1, 65000));
  cmd->add_option("--port_file,--port-file", args->port_file,
                  "write the bound port here once listening");
  cmd->add_option("--tls_cert,--tls-cert", args->tls_cert,
                  "serve HTTPS (TLS 1.2+) with this PEM certificate (chain)");
  cmd->add_option("--tls_key,--tls-key", args->tls_key, "the PEM private key of --tls_cert");
  cmd->add_flag("--insecure_http,--insecure-http", args->insecure_http,
                "allow plain HTTP on a non-loopback --listen (tokens cross the network in clear)");
  cmd->add_option("--add_user,--add-user", args->add_user,
                  "create USER (if needed) and print a new API token for it, then exit");
  cmd->add_flag("--admin", args->admin, "with --add-user: the user may see and manage everything");
  auto* rt = cmd->add_option("--revoke_token,--revoke-token", args->revoke_token,
                             "revoke this API token (requests with it get 401), then exit");
  cmd->add_option("--revoke_user,--revoke-user", args->revoke_user,
                  "revoke every token of USER, then exit")
      ->excludes(rt);
  cmd->add_flag("--openapi", args->openapi, "print the OpenAPI document and exit");
  cmd->add_option("--set_quota,--set-quota", args->set_quota,
                  "USER:key=value,... (max_gpus, max_containers, max_cpus, max_memory, "
                  "max_gpu_hours, period_hours, reset; USER * = everyone), then exit");
  cmd->add_option("--set_idle_policy,--set-idle-policy", args->set_idle_policy,
                  "USER:key=value,... (enabled, utilization_percent, idle_minutes, warn_minutes, "
                  "network_bytes, release_gpus, reset; USER * = everyone), then exit");
  cmd->add_flag("--show_policies,--show-policies", args->show_policies,
                "print the stored quotas and idle policies, then exit");
  cmd->callback([args, &ctx] {
    (void)ctx;
    run(*args);
  });
}

}  // namespace gpulab::cli
