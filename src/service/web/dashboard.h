// The web dashboard's server side: its sign-in sessions, the GPU history ring buffer, the live
// event hub, and the sampler thread that feeds both; plus its routes (page, assets, session,
// history, events). The page itself lives in web/ and is served from the binary.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "service/base/event_hub.h"
#include "service/base/gpu_history.h"
#include "service/http/router.h"
#include "service/http/web_session.h"
#include "service/ops/service.h"

namespace gpulab::service {

class Dashboard {
 public:
  explicit Dashboard(Service& s);
  ~Dashboard();
  // Starts the sampler: a GPU sample every config.dashboard.sample_seconds, and a check for
  // changed containers / snapshots / backups every second.
  void start();
  void stop();
  // One sampler step (also used by tests): samples GPUs when due, publishes what changed.
  void tick();

  Service& service;
  WebSessions sessions;
  GpuHistory history;
  EventHub hub;

 private:
  void sample_gpus_now();
  std::size_t last_containers_ = 0, last_images_ = 0;
  std::chrono::steady_clock::time_point next_sample_{};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

// GET /, the page's assets, /session (sign in, who am I, sign out), /gpus/history, /events.
void add_dashboard_routes(Router& router, Dashboard& dashboard);

}  // namespace gpulab::service
