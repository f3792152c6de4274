// The book's table of host ports an engine refused (refused_ports.h).
#include "service/store/refused_ports.h"

namespace gpulab::service {

void hold_refused_port(Store& st, const std::string& host, int port, double until) {
  st.db().exec("INSERT OR REPLACE INTO port_refused(host,port,until) VALUES(?,?,?)",
               {host, static_cast<std::int64_t>(port), until});
}

std::set<int> refused_ports(Store& st, const std::string& host, double now) {
  std::set<int> out;
  for (const auto& r :
       st.db().query("SELECT port FROM port_refused WHERE host=? AND until>?", {host, now}))
    out.insert(static_cast<int>(r.i64(0)));
  return out;
}

}  // namespace gpulab::service
