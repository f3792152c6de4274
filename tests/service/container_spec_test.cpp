// The typed container spec: request fields parsed once into engine units, the stored form as it
// always was, a stored or uploaded record checked like a request, and the one name rule.
#include <gtest/gtest.h>

#include "core/names.h"
#include "service/base/api_error.h"
#include "service/domain/container_spec.h"
#include "service/domain/validation.h"

namespace gpulab::service {
namespace {

TEST(ContainerSpec, RequestLimitsParsedIntoEngineUnits) {
  Json req = {{"cpus", "2"},           {"memory", "8g"}, {"shm_size", 1073741824},
              {"port", {"3002:3002"}}, {"gpu_count", 1}, {"pids_limit", 256}};
  ContainerSpec s = apply_spec_fields(req, ContainerSpec{});
  EXPECT_EQ(s.cpus.text, "2");
  EXPECT_EQ(s.cpus.nano_cpus, 2'000'000'000);
  EXPECT_DOUBLE_EQ(s.cpus.cpus(), 2.0);
  EXPECT_EQ(s.memory.text, "8g");
  EXPECT_EQ(s.memory.bytes, 8ll << 30);
  EXPECT_EQ(s.shm_size.text, "1073741824");
  EXPECT_EQ(s.shm_size.bytes, 1ll << 30);
  ASSERT_EQ(s.ports.size(), 1u);
  EXPECT_EQ(s.ports[0].host_port, 3002);
  EXPECT_EQ(s.gpu_count, 1);
  EXPECT_EQ(s.pids_limit, 256);
}

TEST(ContainerSpec, FieldsNotInTheRequestKeepTheBase) {
  ContainerSpec base = apply_spec_fields({{"cpus", 0.5}, {"memory", "512m"}}, ContainerSpec{});
  ContainerSpec s = apply_spec_fields({{"memory", "1g"}}, base);
  EXPECT_EQ(s.cpus.text, "0.5");
  EXPECT_EQ(s.cpus.nano_cpus, 500'000'000);
  EXPECT_EQ(s.memory.bytes, 1ll << 30);
  EXPECT_FALSE(s.shm_size.set());
}

TEST(ContainerSpec, StoredFormKeepsTheTextAndRoundTrips) {
  ContainerSpec s = apply_spec_fields({{"cpus", "1.5"}, {"memory", "2g"}}, ContainerSpec{});
  s.image = "lab:1";
  Json j = s.to_json();
  EXPECT_EQ(j["cpus"], "1.5");  // as the user wrote it, as rows and backups always held it
  EXPECT_EQ(j["memory"], "2g");
  EXPECT_EQ(j["shm_size"], "");
  ContainerSpec back = ContainerSpec::from_json(j);
  EXPECT_EQ(back.cpus.nano_cpus, 1'500'000'000);
  EXPECT_EQ(back.memory.bytes, 2ll << 30);
  EXPECT_FALSE(back.shm_size.set());
  EXPECT_EQ(back.image, "lab:1");
}

TEST(ContainerSpec, BadValuesRefusedWhereverTheyComeFrom) {
  for (const char* field : {"cpus", "memory", "shm_size"}) {
    EXPECT_THROW(apply_spec_fields({{field, "lots"}}, ContainerSpec{}), ApiError) << field;
    EXPECT_THROW(ContainerSpec::from_json({{field, "-1"}}), ApiError) << field;
  }
}

// A record's ports and env (an uploaded backup's manifest is user input) pass the request's
// checks: no reserved GPU-visibility variable, no port out of range.
TEST(ContainerSpec, StoredPortsAndEnvCheckedLikeARequest) {
  ContainerSpec ok = ContainerSpec::from_json(
      {{"ports", {{{"host_port", 3002}, {"container_port", 22}, {"protocol", "udp"}}}},
       {"env", {"A=1"}}});
  ASSERT_EQ(ok.ports.size(), 1u);
  EXPECT_EQ(ok.ports[0].protocol, "udp");
  EXPECT_EQ(ok.env, std::vector<std::string>{"A=1"});
  EXPECT_THROW(ContainerSpec::from_json({{"env", {"CUDA_VISIBLE_DEVICES=0,1,2,3"}}}), ApiError);
  EXPECT_THROW(ContainerSpec::from_json({{"env", {"GPULAB_OWNER=root"}}}), ApiError);
  EXPECT_THROW(
      ContainerSpec::from_json({{"ports", {{{"host_port", 70000}, {"container_port", 22}}}}}),
      ApiError);
}

// Run from the service's own images (a recreate, then a move), it keeps the image it was created
// from, stored and shown; an uploaded manifest's origin_image is checked like user input.
TEST(ContainerSpec, KeepsTheImageItCameFromAcrossInternalImages) {
  ContainerSpec s;
  s.image = "lab:1";
  EXPECT_EQ(s.shown_image(), "lab:1");
  EXPECT_FALSE(s.to_json().contains("origin_image"));  // rows written before stay as they were
  s.run_from("gpulab-recreate:c1-1-ab");
  s.run_from("gpulab-move:c1-2-cd");
  EXPECT_EQ(s.image, "gpulab-move:c1-2-cd");
  EXPECT_EQ(s.shown_image(), "lab:1");
  ContainerSpec back = ContainerSpec::from_json(s.to_json());
  EXPECT_EQ(back.origin_image, "lab:1");
  EXPECT_EQ(back.image, "gpulab-move:c1-2-cd");
  for (const std::string& bad : {std::string("lab\n1"), std::string("<b>x</b>"),
                                 std::string(256, 'a'), std::string("lab\0x", 5)}) {
    Json j = s.to_json();
    j["origin_image"] = bad;
    EXPECT_THROW(ContainerSpec::from_json(j), ApiError) << bad;
  }
}

TEST(ContainerSpec, OneNameRuleOf64Characters) {
  std::string longest(kMaxObjectNameLength, 'a');
  EXPECT_EQ(longest.size(), 64u);
  EXPECT_TRUE(valid_object_name(longest));
  EXPECT_FALSE(valid_object_name(longest + "a"));
  EXPECT_NO_THROW(check_name(longest, "container name"));
  EXPECT_THROW(check_name(longest + "a", "container name"), ApiError);
}

}  // namespace
}  // namespace gpulab::service
