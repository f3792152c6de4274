// Config file: strict keys, declared GPUs, device paths checked in map mode, --listen parsing.
#include <gtest/gtest.h>

#include "service/base/config.h"
#include "service/engine/docker_attachment.h"
#include "service/engine/inventory.h"

namespace gpulab::service {
namespace {

TEST(Config, DeclaredGpusAndDefaults) {
  auto c = config_from_json(R"({"gpus":[{"uuid":"GPU-a","index":0,"vendor":"nvidia"},
                                        {"uuid":"GPU-b","index":1,"vendor":"nvidia","links":[0]}],
                               "device_mode":"none","ssh_port_base":3300})");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->gpus.size(), 2u);
  EXPECT_EQ(c->ssh_port_base, 3300);
  EXPECT_EQ(c->device_mode, DeviceMode::kNone);
  EXPECT_TRUE(validate_config(*c).ok());
  auto inv = build_inventory(*c);
  EXPECT_EQ(inv.source, "declared");
  EXPECT_EQ(inv.gpu_type, "nvidia");
}

TEST(Config, RefusesUnknownKeysAndDuplicates) {
  EXPECT_FALSE(config_from_json(R"({"listen":"127.0.0.1:8000","privileged":true})").ok());
  EXPECT_FALSE(config_from_json(R"({"gpus":[{"uuid":"x","vendor":"intel"}]})").ok());
  auto dup =
      config_from_json(R"({"device_mode":"none","gpus":[{"uuid":"x","index":0,"vendor":"amd"},
                                                               {"uuid":"x","index":1,"vendor":"amd"}]})");
  ASSERT_TRUE(dup.ok());
  EXPECT_FALSE(validate_config(*dup).ok());
}

TEST(Config, MapModeNeedsRealCharacterDevices) {
  // A declared AMD GPU whose render node this host lacks must not pass in map mode...
  auto missing = config_from_json(
      R"({"gpus":[{"uuid":"GPU-amd0","index":0,"vendor":"amd","render_node":"/dev/dri/renderD199"}]})");
  ASSERT_TRUE(missing.ok());
  auto st = validate_config(*missing);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("renderD199"), std::string::npos);
  // ...and a regular file is not a device either.
  auto file = config_from_json(
      R"({"gpus":[{"uuid":"GPU-amd0","index":0,"vendor":"amd","render_node":"/etc/hostname"}],
          "amd_kfd_path":"/dev/null"})");
  ASSERT_TRUE(file.ok());
  EXPECT_FALSE(validate_config(*file).ok());
  // Safe character devices stand in for kfd and the render node in tests: only these are mapped.
  auto safe = config_from_json(
      R"({"gpus":[{"uuid":"GPU-amd0","index":0,"vendor":"amd","render_node":"/dev/null",
                   "render_node_in_container":"/dev/dri/renderD128"}],
          "amd_kfd_path":"/dev/zero","amd_kfd_in_container":"/dev/kfd"})");
  ASSERT_TRUE(safe.ok());
  EXPECT_TRUE(validate_config(*safe).ok());
  auto att = attachment_for(safe->gpus, *safe);
  ASSERT_EQ(att.devices.size(), 2u);
  EXPECT_EQ(att.devices[0].path_on_host, "/dev/zero");
  EXPECT_EQ(att.devices[1].path_on_host, "/dev/null");
  EXPECT_EQ(att.devices[1].path_in_container, "/dev/dri/renderD128");
  // No GPUs: no devices, and NVIDIA visibility explicitly "void".
  auto none = attachment_for({}, *safe);
  EXPECT_TRUE(none.devices.empty());
  EXPECT_TRUE(none.requests.empty());
  EXPECT_EQ(none.env[0], "NVIDIA_VISIBLE_DEVICES=void");
}

TEST(Config, NvidiaByUuid) {
  auto c = config_from_json(R"({"gpus":[{"uuid":"GPU-1111","index":0,"vendor":"nvidia"},
                                        {"uuid":"GPU-2222","index":1,"vendor":"nvidia"}]})");
  ASSERT_TRUE(c.ok());
  auto att = attachment_for({c->gpus[1]}, *c);
  ASSERT_EQ(att.requests.size(), 1u);
  EXPECT_EQ(att.requests[0].device_ids, std::vector<std::string>{"GPU-2222"});
  EXPECT_EQ(att.env[0], "NVIDIA_VISIBLE_DEVICES=GPU-2222");
  c->device_mode = DeviceMode::kNone;
  EXPECT_TRUE(attachment_for({c->gpus[1]}, *c).requests.empty());
}

TEST(Config, Listen) {
  ServiceConfig c;
  ASSERT_TRUE(parse_listen("0.0.0.0:9000", c).ok());
  EXPECT_EQ(c.listen_host, "0.0.0.0");
  EXPECT_EQ(c.listen_port, 9000);
  ASSERT_TRUE(parse_listen("[::1]:8000", c).ok());
  EXPECT_EQ(c.listen_host, "::1");
  EXPECT_FALSE(parse_listen("nohost", c).ok());
  EXPECT_FALSE(parse_listen("1.2.3.4:99999", c).ok());
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
}

// One key table reads every key and refuses anything else, at every level.
TEST(Config, KeyTableReadsKeysAndRefusesTheRest) {
  auto c = config_from_json(R"({"db":"/tmp/x.db","lease_grace_seconds":7,"device_mode":"none",
      "users":[{"name":"ann","token_sha256":"ab"}],
      "dashboard":{"sample_seconds":2,"history_seconds":10},
      "gpus":[{"uuid":"GPU-a","vendor":"amd","render_node":"/dev/dri/renderD128"}]})");
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->db_path, "/tmp/x.db");
  EXPECT_EQ(c->lease_grace_seconds, 7);
  EXPECT_EQ(c->device_mode, DeviceMode::kNone);
  ASSERT_EQ(c->users.size(), 1u);
  EXPECT_FALSE(c->users[0].admin);
  EXPECT_EQ(c->dashboard.sample_seconds, 2);
  ASSERT_EQ(c->gpus.size(), 1u);
  EXPECT_EQ(c->gpus[0].index, 0);
  EXPECT_EQ(c->gpus[0].render_node_in_container, "/dev/dri/renderD128");  // defaults to the host's
  auto message = [](const char* text) {
    auto r = config_from_json(text);
    return r.ok() ? std::string("(accepted)") : r.error().message;
  };
  EXPECT_NE(message(R"({"dashboard":{"colour":1}})").find("unknown key 'colour' in dashboard"),
            std::string::npos);
  EXPECT_NE(message(R"({"gpus":[{"index":0,"vendor":"nvidia"}]})").find("missing key 'uuid'"),
            std::string::npos);
  EXPECT_NE(message(R"({"users":[{"name":"a","token_sha256":"x","role":"y"}]})")
                .find("unknown key 'role' in users[]"),
            std::string::npos);
  EXPECT_NE(message(R"({"ssh_port_base":"high"})").find("ssh_port_base"), std::string::npos);
}

// Hosts: each error names its field; without hosts, one host "local" from docker_host and gpus.
TEST(Config, HostsAreCheckedFieldByField) {
  auto error_of = [](const std::string& hosts) {
    auto c = config_from_json(R"({"device_mode":"none","hosts":)" + hosts + "}");
    if (!c.ok()) return c.error().message;
    auto st = validate_config(*c);
    return st.ok() ? std::string("(accepted)") : st.error().message;
  };
  auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  std::string m = error_of(R"([{"name":"a","url":"tcp://gpu2:2376"}])");
  EXPECT_TRUE(has(m, "hosts[0].tls_ca is missing") && has(m, "insecure")) << m;
  m = error_of(R"([{"name":"a","url":"tcp://gpu2:2376","tls_ca":"/nonexistent/ca.pem",
                   "tls_cert":"/nonexistent/c.pem","tls_key":"/nonexistent/k.pem"}])");
  EXPECT_TRUE(has(m, "hosts[0].tls_ca: no such file /nonexistent/ca.pem")) << m;
  m = error_of(R"([{"name":"a","url":"unix:///x.sock"},{"name":"a","url":"unix:///y.sock"}])");
  EXPECT_TRUE(has(m, "hosts[1].name: host 'a' given twice")) << m;
  m = error_of(R"([{"name":"a","url":"http://gpu2"}])");
  EXPECT_TRUE(has(m, "hosts[0].url")) << m;
  m = error_of(R"([{"name":"a","url":"tcp://gpu2"}])");
  EXPECT_TRUE(has(m, "hosts[0].url")) << m;
  m = error_of(R"([{"name":"a","url":"tcp://:2376","insecure":true}])");  // no host
  EXPECT_TRUE(has(m, "hosts[0].url")) << m;
  m = error_of(R"([{"name":"a","url":"tcp://gpu2:99999","insecure":true}])");
  EXPECT_TRUE(has(m, "hosts[0].url")) << m;
  m = error_of(R"([{"name":"A b","url":"unix:///x.sock"}])");
  EXPECT_TRUE(has(m, "hosts[0].name")) << m;
  m = error_of(R"([{"name":"a","url":"unix:///x.sock","gpus":[{"uuid":"G","vendor":"nvidia"}]},
                   {"name":"b","url":"unix:///y.sock","gpus":[{"uuid":"G","vendor":"nvidia"}]}])");
  EXPECT_TRUE(has(m, "hosts[1].gpus: GPU uuid G declared twice")) << m;
  m = error_of(R"([{"name":"a","url":"unix:///x.sock","port":1}])");
  EXPECT_TRUE(has(m, "unknown key 'port' in hosts[0]")) << m;
  EXPECT_EQ(error_of(R"([{"name":"a","url":"tcp://gpu2:2375","insecure":true}])"), "(accepted)");

  auto both = config_from_json(R"({"docker_host":"unix:///x.sock",
                                   "hosts":[{"name":"a","url":"unix:///y.sock"}]})");
  ASSERT_TRUE(both.ok());
  EXPECT_NE(validate_config(*both).error().message.find("inside each of hosts"), std::string::npos);

  auto one = config_from_json(R"({"docker_host":"unix:///x.sock",
                                  "gpus":[{"uuid":"G","vendor":"nvidia"}]})");
  ASSERT_TRUE(one.ok());
  auto hosts = lab_hosts(*one);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0].name, "local");
  EXPECT_EQ(hosts[0].url, "unix:///x.sock");
  ASSERT_EQ(hosts[0].gpus.size(), 1u);
  EXPECT_EQ(hosts[0].gpus[0].host, "local");
}

// The GPU probe's keys: a service-wide image with each host's own over it, an absolute root.
TEST(Config, ProbeKeysAreReadAndChecked) {
  auto c = config_from_json(R"({"device_mode":"none","probe_image":"busybox:latest",
      "probe_timeout_seconds":5,"probe_retry_seconds":9,
      "hosts":[{"name":"a","url":"unix:///x.sock"},
               {"name":"b","url":"unix:///y.sock","probe_image":"rocm-lab:6","probe_root":"/srv"}]})");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(validate_config(*c).ok());
  EXPECT_EQ(c->probe_image, "busybox:latest");
  EXPECT_EQ(c->probe_timeout_seconds, 5);
  EXPECT_EQ(c->probe_retry_seconds, 9);
  EXPECT_EQ(c->hosts[0].probe_image, "");
  EXPECT_EQ(c->hosts[0].probe_root, "/");
  EXPECT_EQ(c->hosts[1].probe_image, "rocm-lab:6");
  EXPECT_EQ(c->hosts[1].probe_root, "/srv");
  auto error_of = [](const std::string& text) {
    auto r = config_from_json(text);
    if (!r.ok()) return r.error().message;
    auto st = validate_config(*r);
    return st.ok() ? std::string("(accepted)") : st.error().message;
  };
  EXPECT_NE(error_of(R"({"hosts":[{"name":"a","url":"unix:///x.sock","probe_root":"srv"}]})")
                .find("hosts[0].probe_root: 'srv' is not an absolute path"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"probe_timeout_seconds":0})").find("probe_timeout_seconds must be 1..600"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"probe_image":"busy box"})").find("probe_image"), std::string::npos);
  EXPECT_NE(error_of(R"({"hosts":[{"name":"a","url":"unix:///x.sock","probe_dir":"/"}]})")
                .find("unknown key 'probe_dir' in hosts[0]"),
            std::string::npos);
}

}  // namespace
}  // namespace gpulab::service
