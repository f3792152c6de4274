// What the soaks under faults share (soak_test.cpp: one engine, service kills; soak_hosts_test.cpp:
// three engines, service and engine kills): the users' random walk, the outcome counts, and the
// invariants read from the book and each engine, host by host.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "docker/client.h"
#include "http_client.h"
#include "service_process.h"

namespace gpulab::service::testing {

// An environment knob as a number; `fallback` when unset or empty.
long soak_env(const char* name, long fallback);

struct SoakCounts {
  std::atomic<long> ops{0}, ok{0}, refused{0}, cut{0}, internal{0};
};

// One user's random walk of create / start / stop / restart / delete / update-resources /
// snapshot / restore-snapshot / backup / restore; a round stops at `target` operations or when
// `stop` is set. `image` is what creates ask for.
class SoakWalker {
 public:
  SoakWalker(int user, std::string token, std::string prefix, unsigned seed, std::string image);
  void round(const std::string& url, SoakCounts& n, long target, const std::atomic<bool>& stop,
             const std::function<void(long)>& after_op);

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string any_mine() { return mine_.empty() ? prefix_ + "-none" : mine_[pick(mine_.size())]; }
  std::string fresh(const char* kind) {
    return prefix_ + "-u" + std::to_string(user_) + kind + std::to_string(serial_++);
  }
  void forget(const std::string& name);
  HttpResult one(HttpClient& c);
  HttpResult on_existing(HttpClient& c, int roll, const Json& limits);
  HttpResult restore_one(HttpClient& c, int roll, const Json& limits);

  int user_;
  std::string token_, prefix_, image_;
  std::mt19937 rng_;
  int serial_ = 0;
  std::vector<std::string> mine_, snaps_, backups_;
};

// Waits (up to 120 s) until no backup is still being written, so its .partial is not "left".
void wait_backups(const std::string& url, const std::string& admin_token);

// One host as the invariant check sees it: its name in the book's `host` column, and the test's
// own client of its engine, or null while the host is down (its rows are then not compared).
struct SoakHost {
  std::string name;
  const docker::Client* engine = nullptr;
};
struct SoakQuota {
  int max_gpus = 2;
  int max_containers = 3;
};
inline constexpr SoakQuota kSoakQuota{};  // the default quota every soak user runs under

// Every invariant, from the book (SQLite, read beside the service) and each up host's engine:
// no GPU or host port held twice on one host, book == engine (names, host, running state, GPUs,
// SSH port), no intent or lease left, no orphan container, port, image or temporary file, no
// quota exceeded (summed over hosts). A down host's rows must keep their GPUs (as many as their
// spec asks). Containers and images outside `prefix` are not this run's.
std::vector<std::string> soak_violations(const std::vector<SoakHost>& hosts,
                                         const ServiceProcess& svc, const std::string& prefix,
                                         SoakQuota quota);

// Invariant checks and what they found, over a run.
struct SoakTally {
  long checks = 0, violations = 0;
  long settled = 0;  // found at first, gone after the settle wait
};
// Runs `find`; if it reports anything, waits `settle` (the engine may finish a request the
// killed service sent after the restart's reconcile ran; the reconciler's periodic pass must
// settle it) and runs it again. What stays is printed and counted as violations.
void soak_check(const char* when, const std::function<std::vector<std::string>()>& find,
                std::chrono::seconds settle, SoakTally& t);

}  // namespace gpulab::service::testing
