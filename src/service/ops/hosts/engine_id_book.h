// Which host of the config owns each Docker engine (by engine ID): one engine listed under two
// names would put one machine's GPUs and containers in the book twice. At start a second name is
// refused (the service does not start); a host that first answers later, or comes back as an
// engine another host already owns, is kept down with the reason.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "core/result.h"
#include "service/engine/engine.h"

namespace gpulab::service {

class EngineIdBook {
 public:
  // Records `engine` as `host`'s. An error naming both hosts and the ID when another host owns
  // it; ok when the engine's ID cannot be read (it is not compared, as nothing can be). With
  // `log`, the first refusal of a host is logged (a host monitor asks again every check).
  Status admit(const std::string& host, const Engine& engine, bool log = false);

 private:
  std::mutex mu_;  // two hosts that answer at once are compared one after the other
  std::map<std::string, std::string> host_of_id_;
  std::set<std::string> refused_;  // hosts whose refusal was logged
};

}  // namespace gpulab::service
