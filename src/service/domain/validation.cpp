// Request schemas and value checks; every refusal names the field and what would be accepted.
#include "service/domain/validation.h"

#include <fnmatch.h>

#include <cmath>
#include <set>

#include "core/names.h"
#include "core/strings.h"
#include "service/base/api_error.h"

namespace gpulab::service {

namespace {

using FT = FieldType;

const FieldSpec kName{"name", FT::kString, true, "container name: 1-64 of [A-Za-z0-9_.-]"};
const FieldSpec kGpuCount{"gpu_count", FT::kInteger, false, "number of GPUs (0 = none)"};
const FieldSpec kPort{"port", FT::kStringArray, false,
                      "host:container port mappings, e.g. [\"3002:3002\"]"};
const FieldSpec kCpus{"cpus", FT::kNumberOrString, false, "CPU limit, e.g. \"2\" or 0.5"};
const FieldSpec kMemory{"memory", FT::kNumberOrString, false, "memory limit, e.g. \"8g\""};
const FieldSpec kShm{"shm_size", FT::kNumberOrString, false, "/dev/shm size, e.g. \"1g\""};
const FieldSpec kPids{"pids_limit", FT::kInteger, false, "maximum number of processes"};
const FieldSpec kKey{"ssh_public_key", FT::kString, false,
                     "an OpenSSH public key to log in with instead of the generated password"};
const FieldSpec kEnv{"env", FT::kStringArray, false, "extra environment, [\"KEY=value\"]"};
const FieldSpec kHost{"host", FT::kString, false,
                      "lab host to run it on (default: placement chooses)"};

// Fields people try to pass through to the engine; named so the refusal says why.
const std::set<std::string> kForbidden = {
    "privileged", "volumes",     "volume",       "mounts",       "binds",        "devices",
    "device",     "cap_add",     "capabilities", "network_mode", "network",      "net",
    "pid_mode",   "pid",         "ipc_mode",     "userns_mode",  "security_opt", "sysctls",
    "runtime",    "host_config", "HostConfig",   "user",         "entrypoint",   "cmd"};

const char* type_name(FT t) {
  switch (t) {
    case FT::kString:
      return "a string";
    case FT::kInteger:
      return "an integer";
    case FT::kNumberOrString:
      return "a number or a string";
    case FT::kStringArray:
      return "an array of strings";
    case FT::kBoolean:
      return "true or false";
  }
  return "?";
}

bool type_ok(const Json& v, FT t) {
  switch (t) {
    case FT::kString:
      return v.is_string();
    case FT::kInteger:
      return v.is_number_integer();
    case FT::kNumberOrString:
      return v.is_number() || v.is_string();
    case FT::kStringArray:
      if (!v.is_array()) return false;
      for (const auto& e : v)
        if (!e.is_string()) return false;
      return true;
    case FT::kBoolean:
      return v.is_boolean();
  }
  return false;
}

// Both restores (from a snapshot, from a backup): where the image comes from, the new container's
// name, and the settings that may differ from the recorded spec (ports never carry over).
RequestSchema restore_request(const char* name, FieldSpec source) {
  return {name,
          {source,
           {"name", FT::kString, true, "name of the new container"},
           kGpuCount,
           kPort,
           kCpus,
           kMemory,
           kShm,
           kPids,
           kKey}};
}

[[noreturn]] void invalid(const std::string& msg, const std::string& hint = {}) {
  throw ApiError(ApiCode::kInvalidRequest, msg, hint);
}

}  // namespace

const RequestSchema& create_schema() {
  static const RequestSchema s{
      "CreateRequest",
      {kName,
       {"image", FT::kString, true, "image already on the engine, e.g. \"nvidia-lab:latest\""},
       kPort,
       kGpuCount,
       kCpus,
       kMemory,
       kShm,
       kPids,
       kKey,
       kEnv,
       kHost}};
  return s;
}
const RequestSchema& name_schema() {
  static const RequestSchema s{"NameRequest", {kName}};
  return s;
}
const RequestSchema& move_schema() {
  static const RequestSchema s{
      "MoveRequest",
      {kName, {"host", FT::kString, true, "the lab host to move the stopped container to"}}};
  return s;
}
const RequestSchema& update_resources_schema() {
  static const RequestSchema s{"UpdateResourcesRequest", {kName, kCpus, kMemory, kPids, kGpuCount}};
  return s;
}
const RequestSchema& snapshot_schema() {
  static const RequestSchema s{
      "SnapshotRequest",
      {kName, {"snapshot_name", FT::kString, true, "name of the snapshot to create"}}};
  return s;
}
const RequestSchema& restore_snapshot_schema() {
  static const RequestSchema s = restore_request(
      "RestoreSnapshotRequest", {"snapshot_name", FT::kString, true, "snapshot to start from"});
  return s;
}
const RequestSchema& backup_schema() {
  static const RequestSchema s{
      "BackupRequest",
      {kName,
       {"backup_name", FT::kString, true, "writes backup_<backup_name>.tar in the backup dir"}}};
  return s;
}
const RequestSchema& restore_schema() {
  // A backup's image is loaded where the container goes, so it may go to any host; a snapshot's
  // is on its source's host already.
  static const RequestSchema s = [] {
    RequestSchema r = restore_request(
        "RestoreRequest", {"backup_path", FT::kString, true,
                           "backup file name in the backup dir, e.g. \"my-backup-v1.tar\""});
    r.fields.push_back(kHost);
    return r;
  }();
  return s;
}
const RequestSchema& delete_snapshot_schema() {
  static const RequestSchema s{"DeleteSnapshotRequest",
                               {{"snapshot_name", FT::kString, true, "snapshot to delete"}}};
  return s;
}
const RequestSchema& delete_backup_schema() {
  static const RequestSchema s{"DeleteBackupRequest",
                               {{"backup_name", FT::kString, true, "backup to delete"}}};
  return s;
}
const RequestSchema& user_schema() {
  static const RequestSchema s{"UserRequest",
                               {{"name", FT::kString, true, "user name"},
                                {"admin", FT::kBoolean, false, "may see and manage everything"}}};
  return s;
}

const RequestSchema& revoke_schema() {
  static const RequestSchema s{
      "RevokeRequest",
      {{"token", FT::kString, false, "the token to revoke"},
       {"name", FT::kString, false, "or a user: revoke all of their tokens"}}};
  return s;
}

const RequestSchema& lease_schema() {
  static const RequestSchema s{
      "LeaseRequest",
      {{"name", FT::kString, true, "lease name; label your container gpulab.lease=<name>"},
       {"gpu_count", FT::kInteger, false, "GPUs to book (default 0)"},
       {"ssh_port", FT::kBoolean, false, "also book an SSH port (default true)"},
       {"host", FT::kString, false,
        "the host whose engine you create the container on (default: the first host); "
        "gpulab ddp picks the one it runs on"}}};
  return s;
}

std::vector<const RequestSchema*> all_schemas() {
  return {&create_schema(),
          &name_schema(),
          &move_schema(),
          &update_resources_schema(),
          &snapshot_schema(),
          &restore_snapshot_schema(),
          &backup_schema(),
          &restore_schema(),
          &delete_snapshot_schema(),
          &delete_backup_schema(),
          &user_schema(),
          &lease_schema(),
          &revoke_schema()};
}

Json parse_request(const std::string& body, const RequestSchema& schema) {
  Json j;
  try {
    j = Json::parse(body);
  } catch (const Json::parse_error& e) {
    invalid(std::string("Malformed JSON: ") + e.what(), "send a JSON object");
  }
  if (!j.is_object()) invalid("Request body must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    const FieldSpec* spec = nullptr;
    for (const auto& f : schema.fields)
      if (key == f.name) spec = &f;
    if (!spec) {
      if (kForbidden.count(key))
        invalid("Field '" + key + "' is not allowed",
                "the service never creates privileged containers, host mounts, devices, extra "
                "capabilities or host namespaces");
      std::string known;
      for (const auto& f : schema.fields)
        known += (known.empty() ? "" : ", ") + std::string(f.name);
      invalid("Unknown field '" + key + "'", "accepted fields: " + known);
    }
    if (!type_ok(value, spec->type))
      invalid("Field '" + key + "' must be " + type_name(spec->type));
  }
  for (const auto& f : schema.fields)
    if (f.required && !j.contains(f.name))
      invalid("Missing required field '" + std::string(f.name) + "'");
  return j;
}

void check_name(const std::string& v, const std::string& field) {
  if (!valid_object_name(v))
    invalid("Invalid " + field + " '" + v + "'",
            "use 1-64 letters, digits, '_', '.', '-', starting with a letter or digit");
}

std::string as_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<std::int64_t>());
  if (v.is_number()) return v.dump();
  return {};
}

std::int64_t parse_cpus(const Json& value) {
  std::string s = as_text(value);
  const double cpus = parse_double(s).value_or(-1);
  if (!(cpus > 0) || cpus > 1024 || !std::isfinite(cpus))
    invalid("Invalid cpus '" + s + "'", "give a number of CPUs > 0, e.g. \"2\" or \"0.5\"");
  return static_cast<std::int64_t>(std::llround(cpus * 1e9));
}

std::int64_t parse_size(const Json& value, const std::string& field) {
  std::string s = as_text(value);
  std::string num = s;
  std::string unit;
  while (!num.empty() && std::isalpha(static_cast<unsigned char>(num.back()))) {
    unit.insert(unit.begin(),
                static_cast<char>(std::tolower(static_cast<unsigned char>(num.back()))));
    num.pop_back();
  }
  if (unit.size() == 2 && unit[1] == 'b') unit.pop_back();
  double mult = 0;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "k")
    mult = 1024.0;
  else if (unit == "m")
    mult = 1024.0 * 1024;
  else if (unit == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "t")
    mult = 1024.0 * 1024 * 1024 * 1024;
  const double n = parse_double(num).value_or(-1);
  double bytes = n * mult;
  // The engine refuses memory limits below 6 MiB; anything past 64 TiB is a typo.
  if (mult == 0 || !(n > 0) || bytes < 6.0 * 1024 * 1024 || bytes > 64.0 * (1ull << 40))
    invalid("Invalid " + field + " '" + s + "'",
            "give a size of at least 6m, e.g. \"512m\" or \"8g\"");
  return static_cast<std::int64_t>(bytes);
}

std::vector<PortMapping> parse_ports(const Json& value) {
  std::vector<PortMapping> out;
  std::set<int> hosts;
  for (const auto& e : value) {
    std::string s = e.get<std::string>();
    PortMapping m;
    std::string body = s;
    auto slash = body.find('/');
    if (slash != std::string::npos) {
      m.protocol = body.substr(slash + 1);
      body = body.substr(0, slash);
    }
    auto colon = body.find(':');
    auto parse_port = [&](const std::string& t) {
      if (t.empty() || t.size() > 5 || t.find_first_not_of("0123456789") != std::string::npos)
        return -1;
      return std::stoi(t);
    };
    int host = colon == std::string::npos ? -1 : parse_port(body.substr(0, colon));
    int cont = colon == std::string::npos ? -1 : parse_port(body.substr(colon + 1));
    if (host < 1 || host > 65535 || cont < 1 || cont > 65535 ||
        (m.protocol != "tcp" && m.protocol != "udp"))
      invalid(
          "Invalid port mapping '" + s + "'",
          "use \"HOST:CONTAINER\" with ports 1-65535, e.g. \"3002:3002\" (optional /tcp or /udp)");
    if (!hosts.insert(host).second) invalid("Host port " + std::to_string(host) + " given twice");
    m.host_port = host;
    m.container_port = cont;
    out.push_back(m);
  }
  return out;
}

std::vector<std::string> parse_env(const Json& value) {
  std::vector<std::string> out;
  for (const auto& e : value) {
    std::string s = e.get<std::string>();
    auto eq = s.find('=');
    std::string key = s.substr(0, eq);
    bool ok = eq != std::string::npos && !key.empty() &&
              (std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_');
    for (char c : key)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') ok = false;
    if (!ok) invalid("Invalid env entry '" + s + "'", "use \"KEY=value\"");
    static const char* const kReserved[] = {"GPULAB_",
                                            "NVIDIA_",
                                            "CUDA_VISIBLE_DEVICES",
                                            "HIP_VISIBLE_DEVICES",
                                            "ROCR_VISIBLE_DEVICES",
                                            "LD_PRELOAD"};
    for (const char* r : kReserved)
      if (key.rfind(r, 0) == 0)
        invalid("Env variable '" + key + "' is reserved", "GPU visibility is set by the service");
    out.push_back(s);
  }
  return out;
}

void check_ssh_public_key(const std::string& key) {
  bool ok = key.size() < 16384 && key.find('\n') == std::string::npos &&
            key.find('\r') == std::string::npos &&
            (key.rfind("ssh-", 0) == 0 || key.rfind("ecdsa-", 0) == 0 || key.rfind("sk-", 0) == 0);
  if (!ok)
    invalid("Invalid ssh_public_key", "give one OpenSSH public key line (ssh-ed25519 AAAA...)");
}

bool image_allowed(const std::string& image, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return true;
  std::string with_tag = image;
  auto last_slash = image.rfind('/');
  if (image.find(':', last_slash == std::string::npos ? 0 : last_slash) == std::string::npos &&
      image.find('@') == std::string::npos)
    with_tag += ":latest";
  for (const auto& p : patterns) {
    if (fnmatch(p.c_str(), image.c_str(), 0) == 0) return true;
    if (fnmatch(p.c_str(), with_tag.c_str(), 0) == 0) return true;
  }
  return false;
}

}  // namespace gpulab::service
