// What a request may contain, per endpoint (one schema table, also the source of the OpenAPI
// document), and the checks of each value: names, images against the allowlist, sizes, ports.
// Anything not in the schema is refused, never passed on to the engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "service/domain/port_mapping.h"

namespace gpulab::service {

enum class FieldType { kString, kInteger, kNumberOrString, kStringArray, kBoolean };

struct FieldSpec {
  const char* name;
  FieldType type;
  bool required;
  const char* description;
};

struct RequestSchema {
  const char* name;  // "CreateRequest"
  std::vector<FieldSpec> fields;
};

// The request bodies of the API (used by handlers and by the OpenAPI document).
const RequestSchema& create_schema();
const RequestSchema& name_schema();  // {"name"}: start, stop, restart, delete
const RequestSchema& move_schema();  // {"name", "host"}: move a stopped container
const RequestSchema& update_resources_schema();
const RequestSchema& snapshot_schema();
const RequestSchema& restore_snapshot_schema();
const RequestSchema& backup_schema();
const RequestSchema& restore_schema();
const RequestSchema& delete_snapshot_schema();
const RequestSchema& delete_backup_schema();
const RequestSchema& user_schema();
const RequestSchema& lease_schema();
const RequestSchema& revoke_schema();
std::vector<const RequestSchema*> all_schemas();

// Parses a JSON body and checks it against `schema`: an object, only known fields, right types,
// required ones present. Throws ApiError INVALID_REQUEST naming the offending field.
Json parse_request(const std::string& body, const RequestSchema& schema);

// Object names (containers, snapshots, backups, leases) under gpulab's name rule (core/names.h)
// (1-64 of [A-Za-z0-9_.-], starting alphanumeric); INVALID_REQUEST naming `field` otherwise.
void check_name(const std::string& value, const std::string& field);
// "2", 2, "0.5" -> nano-CPUs (0 < cpus <= 1024).
std::int64_t parse_cpus(const Json& value);
// "8g", "512m", "1024k", "2048", 2048 -> bytes (units b/k/m/g/t, optional trailing "b").
std::int64_t parse_size(const Json& value, const std::string& field);
// ["3002:3002", "8080:80/udp"]: host and container ports in 1..65535, host ports distinct.
std::vector<PortMapping> parse_ports(const Json& value);
// "KEY=value" entries; names reserved for the service (GPULAB_*, visibility variables) refused.
std::vector<std::string> parse_env(const Json& value);
void check_ssh_public_key(const std::string& key);

// Glob match (fnmatch) of an image reference against allowlist patterns; "busybox" is also
// tried as "busybox:latest". An empty list allows everything (images must still be on the engine).
bool image_allowed(const std::string& image, const std::vector<std::string>& patterns);

// Reads a Json field as string (numbers allowed where the seed sends "2" or 2).
std::string as_text(const Json& v);

}  // namespace gpulab::service
