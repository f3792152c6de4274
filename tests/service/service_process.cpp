// fork/exec of the gpulab binary with a generated config (see service_process.h).
#include "service_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/files.h"
#include "core/subprocess.h"

namespace gpulab::service::testing {

ServiceProcess::ServiceProcess(std::filesystem::path dir, Json config)
    : dir_(std::move(dir)), config_(std::move(config)) {
  std::filesystem::create_directories(dir_ / "backups");
  std::filesystem::create_directories(tmp_dir());
  Json c = {{"listen", "127.0.0.1:0"},
            {"db", (dir_ / "service.db").string()},
            {"backup_dir", (dir_ / "backups").string()},
            {"port_rest_seconds", 1},
            {"reconcile_interval_seconds", 1},
            {"device_mode", "none"}};
  c.update(config_);
  config_ = c;
  std::ofstream(dir_ / "config.json") << config_.dump(2);
}

ServiceProcess::~ServiceProcess() {
  if (pid_ > 0) stop();
}

bool ServiceProcess::start() {
  auto port_file = dir_ / "port";
  std::filesystem::remove(port_file);
  pid_ = ::fork();
  if (pid_ == 0) {
    std::string log = (dir_ / "service.log").string();
    FILE* f = std::fopen(log.c_str(), "a");
    if (f) {
      ::dup2(fileno(f), 1);
      ::dup2(fileno(f), 2);
    }
    // Its own temporary folder, so a test can see what a killed service left there.
    ::setenv("TMPDIR", tmp_dir().c_str(), 1);
    std::string cfg = (dir_ / "config.json").string();
    std::string pf = port_file.string();
    ::execl(GPULAB_BINARY, GPULAB_BINARY, "--log-level", "info", "serve", "--config", cfg.c_str(),
            "--port-file", pf.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto t = read_text(port_file)) {
      port_ = std::stoi(*t);
      return true;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

void ServiceProcess::kill_hard() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void ServiceProcess::stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  kill_hard();
}

std::string ServiceProcess::add_user(const std::string& name, bool admin) {
  std::vector<std::string> argv = {GPULAB_BINARY,      "serve",      "--db",
                                   db_path().string(), "--add-user", name};
  if (admin) argv.push_back("--admin");
  auto r = run_process(argv);
  if (!r.ok() || !r->success()) return {};
  std::string out = r->out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string ServiceProcess::log_tail() const {
  auto text = read_file(dir_ / "service.log");
  if (!text) return "(no log)";
  return text->size() > 4000 ? text->substr(text->size() - 4000) : *text;
}

std::string ServiceProcess::log_lines(const std::string& needle, std::size_t max_lines) const {
  auto text = read_file(dir_ / "service.log");
  if (!text) return "(no log)";
  std::deque<std::string> kept;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);) {
    if (line.find(needle) == std::string::npos) continue;
    kept.push_back(line);
    if (kept.size() > max_lines) kept.pop_front();
  }
  std::string out;
  for (const auto& l : kept) out += l + "\n";
  return out;
}

}  // namespace gpulab::service::testing
