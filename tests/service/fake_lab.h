// A lab on fake engines (fake_engine.h), in this process: the real Service, store, router and
// handlers, with each host's engine in memory. Requests go through the router as the HTTP server
// hands them over, so tests of allocation, placement and quotas read as the API tests they were,
// but run in milliseconds and need no Docker engine.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fake_engine.h"
#include "http_client.h"
#include "service/http/router.h"
#include "service/ops/service.h"

namespace gpulab::service::testing {

// The image every fake host holds (inside the tests' allowlist, gpulab-test/*).
inline constexpr const char* kFakeImage = "gpulab-test/fake-box:latest";

class FakeLab {
 public:
  struct HostSpec {
    std::string name;      // empty (one host only): a lab without a hosts list, its host "local"
    int gpus = 0;          // declared GPUs "GPU-<host>-<i>", two per NUMA node
    bool archives = true;  // whether its engine keeps snapshots and image archives
  };
  // `tune` adjusts the config before the service opens (quotas, policies, auth).
  explicit FakeLab(std::vector<HostSpec> hosts,
                   const std::function<void(ServiceConfig&)>& tune = {});
  ~FakeLab();
  FakeLab(const FakeLab&) = delete;
  FakeLab& operator=(const FakeLab&) = delete;

  Service& service() { return *service_; }
  FakeEngine& engine(const std::string& host = "local");
  std::filesystem::path db_path() const { return dir_ / "service.db"; }
  // A user's new API token.
  std::string add_user(const std::string& name, bool admin);
  // Containers on every fake engine whose name starts with `prefix`.
  int engine_container_count(const std::string& prefix) const;

  // One request through the router: "GET", "/api/v1/gpu-docker/list?x=y", the body, the token.
  HttpResult request(const std::string& method, const std::string& path, const std::string& body,
                     const std::string& token) const;

 private:
  std::filesystem::path dir_;
  std::map<std::string, FakeEngine*> engines_;  // owned by the service's hosts
  std::unique_ptr<Service> service_;
  std::unique_ptr<Router> router_;
};

// The API client of a FakeLab, with HttpClient's calls (the tests read the same).
class LabClient {
 public:
  LabClient(const FakeLab& lab, std::string token) : lab_(lab), token_(std::move(token)) {}
  HttpResult get(const std::string& path) const { return lab_.request("GET", path, "", token_); }
  HttpResult post(const std::string& path, const std::string& body) const {
    return lab_.request("POST", path, body, token_);
  }
  HttpResult post_json(const std::string& path, const Json& body) const {
    return post(path, body.dump());
  }

 private:
  const FakeLab& lab_;
  std::string token_;
};

}  // namespace gpulab::service::testing
