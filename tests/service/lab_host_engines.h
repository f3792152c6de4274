// The three lab dockerds of start-lab-hosts.sh (lab1..lab3 over mutual TLS) for the tests that span
// them: start them (the script restarts any that is not running), the host entry of a
// service config, an engine's pid for a SIGKILL. The lab fixture (lab_hosts.h) starts them here.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "docker/client.h"

namespace gpulab::service::testing {

struct LabHostEngine {
  std::string name, tcp, unix_url;
  std::string address;                   // its network namespace's address, seen from here
  std::optional<docker::Client> client;  // over the unix socket: the test's own view
  std::filesystem::path root() const;    // the engine's folder (pid file, log)
};

struct LabHostEngines {
  std::vector<LabHostEngine> engines;
  std::filesystem::path tls;  // ca.pem, cert.pem, key.pem of the service's client side
  std::string skip;           // why they cannot run here (the test skips), or empty
  std::string error;          // why they failed to start (the test fails), or empty
};

// Runs start-lab-hosts.sh: starts the engines that are not running, reuses the others, and
// makes sure each has the service test images (kBoxImage).
LabHostEngines start_lab_host_engines();

// hosts[] entry for engine i with `gpus` declared GPUs (GPU-<name>-<k>); its ports are published
// on and reached at its address (10.213.(i+1).2, in its own network namespace).
Json lab_host_entry(const LabHostEngines& lab, int i, int gpus);

// The engine's dockerd pid from its pid file; 0 if none.
pid_t lab_engine_pid(const LabHostEngine& e);

// Removes every container the services made on the engines that answer (one thread each).
void remove_lab_managed_containers(LabHostEngines& lab);

}  // namespace gpulab::service::testing
