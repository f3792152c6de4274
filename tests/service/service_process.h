// Runs the real `gpulab serve` binary for a test: writes its config, starts it, waits for it to
// listen, kills it (SIGKILL) or stops it, and issues tokens through the CLI.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "core/json.h"

namespace gpulab::service::testing {

class ServiceProcess {
 public:
  // `dir` holds config.json, service.db, backups/ and the log; `config` is merged over defaults.
  ServiceProcess(std::filesystem::path dir, Json config);
  ~ServiceProcess();
  // Starts and waits (up to 60 s) for the port file; false (with log_tail()) if it died.
  bool start();
  void kill_hard();  // SIGKILL, then reap
  void stop();       // SIGTERM, then reap
  bool running() const { return pid_ > 0; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  std::string add_user(const std::string& name, bool admin);
  std::string log_tail() const;
  // The log's lines (every start's) that contain `needle`: the last `max_lines` of them.
  std::string log_lines(const std::string& needle, std::size_t max_lines = 40) const;
  std::filesystem::path backup_dir() const { return dir_ / "backups"; }
  std::filesystem::path db_path() const { return dir_ / "service.db"; }
  std::filesystem::path tmp_dir() const { return dir_ / "tmp"; }  // the service's TMPDIR

 private:
  std::filesystem::path dir_;
  Json config_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace gpulab::service::testing
