// The book's side of a move between hosts: the journal row and the target's pending booking.
#include "service/base/clock.h"
#include "service/store/store.h"

namespace gpulab::service {

void Store::insert_move(const MoveRecord& m) {
  db_->exec(
      "INSERT INTO moves(tag,container_id,name,source_host,target_host,source_id,prev_state,"
      "old_image,state,started_at) VALUES(?,?,?,?,?,?,?,?,?,?)",
      {m.tag, m.container_id, m.name, m.source_host, m.target_host, m.source_id, m.prev_state,
       m.old_image, m.state, m.started_at.empty() ? iso_now() : m.started_at});
}

std::vector<MoveRecord> Store::moves() {
  std::vector<MoveRecord> v;
  for (const auto& r : db_->query(
           "SELECT tag,container_id,name,source_host,target_host,source_id,prev_state,old_image,"
           "state,started_at FROM moves ORDER BY started_at,tag")) {
    MoveRecord m;
    m.tag = r.str(0);
    m.container_id = r.i64(1);
    m.name = r.str(2);
    m.source_host = r.str(3);
    m.target_host = r.str(4);
    m.source_id = r.str(5);
    m.prev_state = r.str(6);
    m.old_image = r.str(7);
    m.state = r.str(8);
    m.started_at = r.str(9);
    v.push_back(std::move(m));
  }
  return v;
}

void Store::set_move_state(const std::string& tag, const std::string& state) {
  db_->exec("UPDATE moves SET state=? WHERE tag=?", {state, tag});
}

void Store::remove_move(const std::string& tag) {
  db_->exec("DELETE FROM moves WHERE tag=?", {tag});
}

void Store::add_pending_gpu(std::int64_t container_id, const GpuAssignment& gpu) {
  db_->exec(
      "INSERT INTO gpu_allocations(gpu_uuid,gpu_index,container_id,allocated_at,pending) "
      "VALUES(?,?,?,?,1)",
      {gpu.uuid, std::int64_t(gpu.index), container_id, iso_now()});
}

void Store::add_pending_port(std::int64_t container_id, const std::string& host, int port,
                             const std::string& kind, int container_port) {
  db_->exec(
      "INSERT INTO port_allocations(host,port,kind,container_port,container_id,pending) "
      "VALUES(?,?,?,?,?,1)",
      {host, std::int64_t(port), kind, std::int64_t(container_port), container_id});
  db_->exec("DELETE FROM port_rest WHERE port=? AND host=?", {std::int64_t(port), host});
}

void Store::drop_pending(std::int64_t container_id) {
  db_->transaction([&] {
    db_->exec("DELETE FROM gpu_allocations WHERE container_id=? AND pending=1", {container_id});
    db_->exec("DELETE FROM port_allocations WHERE container_id=? AND pending=1", {container_id});
  });
}

void Store::commit_move(const MoveRecord& m, const std::string& docker_id,
                        const ContainerSpec& spec, int ssh_port, const std::string& state) {
  const std::int64_t id = m.container_id;
  db_->transaction([&] {
    db_->exec(
        "INSERT OR REPLACE INTO port_rest(host,port,released_at) SELECT host,port,? FROM "
        "port_allocations WHERE container_id=? AND pending=0",
        {unix_now_precise(), id});
    for (const char* table : {"port_allocations", "gpu_allocations"}) {
      db_->exec(std::string("DELETE FROM ") + table + " WHERE container_id=? AND pending=0", {id});
      db_->exec(std::string("UPDATE ") + table + " SET pending=0 WHERE container_id=?", {id});
    }
    db_->exec(
        "UPDATE containers SET host=?,docker_id=?,spec=?,ssh_port=?,state=?,updated_at=? "
        "WHERE id=?",
        {m.target_host, docker_id, spec.to_json().dump(), std::int64_t(ssh_port), state, iso_now(),
         id});
    db_->exec("UPDATE moves SET state='finish' WHERE tag=?", {m.tag});
  });
}

}  // namespace gpulab::service
