// The book's side of forgetting a host that left the config: which hosts it holds rows on, and
// deleting them (ops/forget_host.h decides when).
#include "service/store/store.h"

namespace gpulab::service {

std::set<std::string> Store::hosts_in_book() {
  std::set<std::string> hosts;
  for (const auto& r :
       db_->query("SELECT host FROM containers UNION SELECT source_host FROM moves UNION SELECT "
                  "target_host FROM moves"))
    hosts.insert(r.str(0));
  return hosts;
}

std::vector<GpuAssignment> Store::host_gpu_rows(const std::string& host) {
  std::vector<GpuAssignment> v;
  for (const auto& r :
       db_->query("SELECT g.gpu_uuid,g.gpu_index FROM gpu_allocations g JOIN containers c ON "
                  "c.id=g.container_id WHERE c.host=? ORDER BY c.id,g.gpu_index",
                  {host}))
    v.push_back(GpuAssignment{r.str(0), static_cast<int>(r.i64(1))});
  return v;
}

std::vector<std::pair<std::string, int>> Store::host_port_rows(const std::string& host) {
  std::vector<std::pair<std::string, int>> v;
  for (const auto& r : db_->query(
           "SELECT host,port FROM port_allocations WHERE host=? OR container_id IN (SELECT id "
           "FROM containers WHERE host=?) ORDER BY host,port",
           {host, host}))
    v.emplace_back(r.str(0), static_cast<int>(r.i64(1)));
  return v;
}

void Store::forget_host_rows(const std::string& host) {
  db_->transaction([&] {
    db_->exec("DELETE FROM containers WHERE host=?", {host});  // their allocations cascade
    // Another container's pending booking there (a move's target) goes with the host.
    db_->exec("DELETE FROM port_allocations WHERE host=?", {host});
    db_->exec("DELETE FROM port_rest WHERE host=?", {host});
    db_->exec("DELETE FROM port_refused WHERE host=?", {host});
  });
}

}  // namespace gpulab::service
