// Request checks: unknown and forbidden fields, types, names, sizes, ports, env, images.
#include <gtest/gtest.h>

#include "service/base/api_error.h"
#include "service/domain/validation.h"

namespace gpulab::service {
namespace {

ApiCode code_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e.api_code();
  }
  return ApiCode::kInternalError;  // "did not throw"
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.error().message;
  }
  return "";
}

TEST(Validation, SeedCreateRequestPasses) {
  Json j = parse_request(R"({"name":"my-gpu-container","image":"nvidia-lab:latest",
      "port":["3002:3002","4002:4002"],"gpu_count":1,"cpus":"2","memory":"8g"})",
                         create_schema());
  EXPECT_EQ(j["name"], "my-gpu-container");
  EXPECT_EQ(parse_cpus(j["cpus"]), 2'000'000'000);
  EXPECT_EQ(parse_size(j["memory"], "memory"), 8ll << 30);
  auto ports = parse_ports(j["port"]);
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_EQ(ports[1].host_port, 4002);
  EXPECT_EQ(ports[1].to_string(), "4002:4002");
}

TEST(Validation, RefusesWhatMustNotPass) {
  auto create = [](const std::string& body) {
    return [body] { parse_request(body, create_schema()); };
  };
  EXPECT_EQ(code_of(create("{not json")), ApiCode::kInvalidRequest);
  EXPECT_EQ(code_of(create("[1,2]")), ApiCode::kInvalidRequest);
  EXPECT_EQ(code_of(create(R"({"name":"a","image":"b","privileged":true})")),
            ApiCode::kInvalidRequest);
  EXPECT_NE(message_of(create(R"({"name":"a","image":"b","privileged":true})")).find("privileged"),
            std::string::npos);
  EXPECT_EQ(code_of(create(R"({"name":"a","image":"b","volumes":["/:/host"]})")),
            ApiCode::kInvalidRequest);
  EXPECT_EQ(code_of(create(R"({"name":"a","image":"b","network_mode":"host"})")),
            ApiCode::kInvalidRequest);
  EXPECT_EQ(code_of(create(R"({"name":"a","image":"b","colour":"red"})")),
            ApiCode::kInvalidRequest);
  EXPECT_EQ(code_of(create(R"({"name":"a"})")), ApiCode::kInvalidRequest);  // image missing
  EXPECT_EQ(code_of(create(R"({"name":"a","image":"b","gpu_count":"1"})")),
            ApiCode::kInvalidRequest);
}

TEST(Validation, Names) {
  check_name("experiment-01", "name");
  check_name("A.b_c-9", "name");
  for (std::string bad : std::vector<std::string>{"", "a/b", "has space", "-lead", ".hidden",
                                                  "../etc", std::string(65, 'x'), "tab\there"})
    EXPECT_EQ(code_of([&] { check_name(bad, "name"); }), ApiCode::kInvalidRequest) << bad;
}

TEST(Validation, Ports) {
  for (std::string bad : {"0:22", "70000:22", "22:0", "abc", "22", "1:2:3", "22:22/sctp", "-1:22"})
    EXPECT_EQ(code_of([&] { parse_ports(Json::array({bad})); }), ApiCode::kInvalidRequest) << bad;
  EXPECT_EQ(code_of([&] {
              parse_ports(Json::array({"3002:1", "3002:2"}));
            }),
            ApiCode::kInvalidRequest);
  auto udp = parse_ports(Json::array({"8080:80/udp"}));
  EXPECT_EQ(udp[0].protocol, "udp");
}

TEST(Validation, SizesAndCpus) {
  EXPECT_EQ(parse_size(Json("512m"), "memory"), 512ll << 20);
  EXPECT_EQ(parse_size(Json("1GB"), "memory"), 1ll << 30);
  EXPECT_EQ(parse_size(Json(16777216), "memory"), 16777216);
  for (auto bad : {"1k", "abc", "-8g", "8x", ""})
    EXPECT_EQ(code_of([&] { parse_size(Json(bad), "memory"); }), ApiCode::kInvalidRequest) << bad;
  EXPECT_EQ(parse_cpus(Json(0.5)), 500'000'000);
  for (auto bad : {"0", "-1", "two", "5000"})
    EXPECT_EQ(code_of([&] { parse_cpus(Json(bad)); }), ApiCode::kInvalidRequest) << bad;
}

TEST(Validation, EnvAndKeys) {
  EXPECT_EQ(parse_env(Json::array({"A=1", "B_2=x=y"})).size(), 2u);
  for (auto bad : {"NOEQUALS", "1A=x", "GPULAB_SSH_PASSWORD=x", "NVIDIA_VISIBLE_DEVICES=all",
                   "CUDA_VISIBLE_DEVICES=0", "LD_PRELOAD=/x.so"})
    EXPECT_EQ(code_of([&] { parse_env(Json::array({bad})); }), ApiCode::kInvalidRequest) << bad;
  check_ssh_public_key("ssh-ed25519 AAAAC3Nza test@host");
  EXPECT_EQ(code_of([] { check_ssh_public_key("ssh-ed25519 AAAA\nssh-rsa BBBB"); }),
            ApiCode::kInvalidRequest);
}

TEST(Validation, ImageAllowlist) {
  EXPECT_TRUE(image_allowed("anything:1", {}));
  std::vector<std::string> pats = {"gpulab-test/*", "nvidia-lab:*"};
  EXPECT_TRUE(image_allowed("gpulab-test/busybox:latest", pats));
  EXPECT_TRUE(image_allowed("nvidia-lab", pats));  // tried as nvidia-lab:latest
  EXPECT_FALSE(image_allowed("evil/miner:latest", pats));
  EXPECT_FALSE(image_allowed("nvidia-lab-evil:latest", pats));
}

TEST(ApiErrors, OneMappingFromCoreCodes) {
  EXPECT_EQ(api_code_name(ApiCode::kGpuAllocationFailed), "GPU_ALLOCATION_FAILED");
  EXPECT_EQ(api_code_name(ApiCode::kPortConflict), "PORT_CONFLICT");
  EXPECT_EQ(api_code_http_status(ApiCode::kPayloadTooLarge), 413);
  EXPECT_EQ(api_code_http_status(ApiCode::kUnauthorized), 401);
  EXPECT_EQ(api_code_http_status(ApiCode::kContainerNotFound), 404);
  ErrorReply r = error_reply(Exception(Code::kUnavailable, "engine down"));
  EXPECT_EQ(api_code_name(r.api_code), "ENGINE_UNAVAILABLE");
  EXPECT_EQ(r.http_status, 503);
  Json env = envelope_error(r);
  EXPECT_EQ(env["success"], false);
  EXPECT_EQ(env["error_code"], "ENGINE_UNAVAILABLE");
}

}  // namespace
}  // namespace gpulab::service
