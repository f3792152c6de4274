// A lab host's engine transport with its waits bounded by the host's answer budget
// (host_answer_seconds): a connection (TCP and TLS) must be made within it and a ping must answer
// within it, so a hung engine costs each caller at most that long, and a connection that cannot
// be made in time reads as the host being unreachable (503), not as a slow request (504). An
// answer held in memory is capped (kMaxAnswerBytes).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "docker/http_transport.h"

namespace gpulab::service {

class BoundedTransport : public docker::HttpTransport {
 public:
  // The most of one answer held in memory (Docker's JSON answers are far smaller).
  static constexpr std::size_t kMaxAnswerBytes = 64u << 20;
  // `host`: the lab host's name, for the errors; `on_hung` hears of each call our bound ended.
  BoundedTransport(std::unique_ptr<docker::HttpTransport> inner, std::string host,
                   std::chrono::milliseconds budget,
                   std::function<void(const std::string&)> on_hung = {})
      : inner_(std::move(inner)),
        host_(std::move(host)),
        budget_(budget),
        on_hung_(std::move(on_hung)) {}
  Result<docker::HttpResponse> send(const docker::HttpRequest& request) override;
  std::string describe() const override { return inner_->describe(); }
  void abandon_stalled_calls(std::chrono::milliseconds idle) override {
    inner_->abandon_stalled_calls(idle);
  }

 private:
  std::unique_ptr<docker::HttpTransport> inner_;
  std::string host_;
  std::chrono::milliseconds budget_;
  std::function<void(const std::string&)> on_hung_;
};

}  // namespace gpulab::service
