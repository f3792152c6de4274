// Asks every host that is up the same question at once, each on a thread of its own, and waits
// at most host_answer_seconds for them all: a host that has not answered by then is left out
// (the caller shows it as unresponsive) and its call ends in the background, bounded by its
// engine's own limits. So one hung engine never holds up an answer about the other hosts. A lab
// of one host is asked on the caller's thread, as before hosts existed: its errors are its own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "service/ops/service.h"

namespace gpulab::service {

template <typename T>
struct HostAnswers {
  std::map<std::string, T> answers;           // by host name
  std::map<std::string, std::string> missed;  // asked, no answer in time (or it threw): why
};

// `ask` is copied into each host's thread and may outlive this call: capture by value. `only`:
// ask just these hosts (those the answer needs). A host that misses the wait is marked
// unresponsive (Host::mark_unresponsive): later requests leave it out at once.
template <typename T>
HostAnswers<T> ask_hosts(Service& s, std::function<T(const Host&, const Engine&)> ask,
                         const std::set<std::string>* only = nullptr) {
  HostAnswers<T> out;
  if (s.hosts.size() == 1) {
    const Host& h = *s.hosts.front();
    if (s.usable(h)) out.answers.emplace(h.name(), ask(h, *h.engine()));
    return out;
  }
  struct Round {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::string, T> answers;
    std::map<std::string, std::string> failed;
    int pending = 0;
  };
  auto round = std::make_shared<Round>();
  std::vector<std::string> asked;
  for (const auto& h : s.hosts) {
    if (!s.usable(*h) || (only && !only->count(h->name()))) continue;
    asked.push_back(h->name());
    {
      std::lock_guard<std::mutex> g(round->mu);
      ++round->pending;
    }
    s.background.begin();
    auto run = [round, ask, hp = h.get(), e = h->engine(), bg = &s.background] {
      std::optional<T> got;
      std::string why;
      try {
        got.emplace(ask(*hp, *e));
      } catch (const std::exception& ex) {
        why = ex.what();
      }
      {
        std::lock_guard<std::mutex> g(round->mu);
        if (got)
          round->answers.emplace(hp->name(), std::move(*got));
        else
          round->failed[hp->name()] = why;
        --round->pending;
        round->cv.notify_all();
      }
      bg->end();
    };
    try {
      std::thread(run).detach();
    } catch (const std::system_error& ex) {  // no thread to be had: that host is left out
      std::lock_guard<std::mutex> g(round->mu);
      round->failed[h->name()] = std::string("cannot start a thread: ") + ex.what();
      --round->pending;
      s.background.end();
    }
  }
  std::unique_lock<std::mutex> lk(round->mu);
  round->cv.wait_for(lk, std::chrono::seconds(s.config.host_answer_seconds),
                     [&] { return round->pending == 0; });
  out.answers = std::move(round->answers);  // a straggler adds to the emptied map later
  out.missed = std::move(round->failed);
  lk.unlock();
  for (const auto& name : asked) {
    if (out.answers.count(name) || out.missed.count(name)) continue;
    out.missed[name] = "did not answer within " + std::to_string(s.config.host_answer_seconds) +
                       " s (host_answer_seconds)";
    s.find_host(name)->mark_unresponsive(out.missed[name]);
  }
  return out;
}

}  // namespace gpulab::service
