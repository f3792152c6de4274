// SQLite schema, migrations and the queries behind Store.
#include "service/store/store.h"

#include "service/base/clock.h"

namespace gpulab::service {

namespace {

// Each migration runs once, in order, in its own transaction; the user_version pragma counts them.
const char* const kMigrations[] = {
    R"sql(
    CREATE TABLE users(
      id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, is_admin INTEGER NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL);
    CREATE TABLE tokens(
      id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
      token_sha256 TEXT UNIQUE NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE containers(
      id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, owner TEXT NOT NULL, state TEXT NOT NULL,
      docker_id TEXT NOT NULL DEFAULT '', spec TEXT NOT NULL, ssh_port INTEGER NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
    CREATE TABLE gpu_allocations(
      gpu_uuid TEXT PRIMARY KEY, gpu_index INTEGER NOT NULL,
      container_id INTEGER NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
      allocated_at TEXT NOT NULL);
    CREATE TABLE port_allocations(
      port INTEGER PRIMARY KEY, kind TEXT NOT NULL, container_port INTEGER NOT NULL,
      container_id INTEGER NOT NULL REFERENCES containers(id) ON DELETE CASCADE);
    CREATE TABLE port_rest(port INTEGER PRIMARY KEY, released_at REAL NOT NULL);
    CREATE TABLE snapshots(
      name TEXT PRIMARY KEY, owner TEXT NOT NULL, source TEXT NOT NULL, image TEXT NOT NULL,
      spec TEXT NOT NULL, created_at TEXT NOT NULL);
    CREATE TABLE backups(
      name TEXT PRIMARY KEY, owner TEXT NOT NULL, source TEXT NOT NULL, file TEXT NOT NULL,
      state TEXT NOT NULL, sha256 TEXT NOT NULL DEFAULT '', message TEXT NOT NULL DEFAULT '',
      bytes_total INTEGER NOT NULL DEFAULT 0, bytes_done INTEGER NOT NULL DEFAULT 0,
      created_at TEXT NOT NULL);
    CREATE TABLE audit_log(
      id INTEGER PRIMARY KEY, at TEXT NOT NULL, user TEXT NOT NULL, action TEXT NOT NULL,
      target TEXT NOT NULL, outcome TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');
    )sql",
    // Quotas and idle-reclaim policies per user ("*": everyone), and GPU-seconds by hour
    // (user_policy.h, usage_meter.h).
    R"sql(
    CREATE TABLE user_policies(
      user TEXT PRIMARY KEY, quota TEXT NOT NULL DEFAULT '{}', idle TEXT NOT NULL DEFAULT '{}',
      updated_at TEXT NOT NULL);
    CREATE TABLE gpu_usage(
      user TEXT NOT NULL, container TEXT NOT NULL, hour INTEGER NOT NULL,
      gpu_seconds REAL NOT NULL, PRIMARY KEY(user, container, hour));
    CREATE TABLE meter_state(id INTEGER PRIMARY KEY CHECK(id=1), last_tick REAL NOT NULL);
    CREATE TABLE book_identity(id INTEGER PRIMARY KEY CHECK(id=1), book_id TEXT NOT NULL);
    )sql",
    // Many hosts: each container's host, and host ports unique per host, not lab-wide. Rows of
    // an older book get host '' here and the first configured host at open (adopt_default_host).
    R"sql(
    ALTER TABLE containers ADD COLUMN host TEXT NOT NULL DEFAULT '';
    CREATE TABLE port_allocations_h(
      host TEXT NOT NULL DEFAULT '', port INTEGER NOT NULL, kind TEXT NOT NULL,
      container_port INTEGER NOT NULL,
      container_id INTEGER NOT NULL REFERENCES containers(id) ON DELETE CASCADE,
      PRIMARY KEY(host, port));
    INSERT INTO port_allocations_h(host,port,kind,container_port,container_id)
      SELECT '',port,kind,container_port,container_id FROM port_allocations;
    DROP TABLE port_allocations;
    ALTER TABLE port_allocations_h RENAME TO port_allocations;
    CREATE TABLE port_rest_h(
      host TEXT NOT NULL DEFAULT '', port INTEGER NOT NULL, released_at REAL NOT NULL,
      PRIMARY KEY(host, port));
    INSERT INTO port_rest_h(host,port,released_at) SELECT '',port,released_at FROM port_rest;
    DROP TABLE port_rest;
    ALTER TABLE port_rest_h RENAME TO port_rest;
    )sql",
    // Moves between hosts (move_ops.h): the journal, and the target's GPUs and ports booked as
    // pending rows of the moving container until the move commits.
    R"sql(
    ALTER TABLE gpu_allocations ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE port_allocations ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE moves(
      tag TEXT PRIMARY KEY, container_id INTEGER NOT NULL, name TEXT NOT NULL,
      source_host TEXT NOT NULL, target_host TEXT NOT NULL, source_id TEXT NOT NULL,
      prev_state TEXT NOT NULL, old_image TEXT NOT NULL, state TEXT NOT NULL,
      started_at TEXT NOT NULL);
    )sql",
    // Host ports an engine refused while the book had them free (refused_ports.h).
    R"sql(
    CREATE TABLE port_refused(
      host TEXT NOT NULL, port INTEGER NOT NULL, until REAL NOT NULL, PRIMARY KEY(host, port));
    )sql",
};

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& path) {
  auto db = Db::open(path);
  if (!db) return db.error();
  std::unique_ptr<Store> store(new Store(std::move(*db)));
  try {
    store->migrate();
  } catch (const Exception& e) {
    return Error{e.code(), "database " + path + ": " + e.error().message};
  }
  return store;
}

int Store::schema_version() {
  return static_cast<int>(db_->query("PRAGMA user_version")[0].i64(0));
}

void Store::migrate() {
  const int have = schema_version();
  const int want = static_cast<int>(std::size(kMigrations));
  for (int v = have; v < want; ++v) {
    db_->transaction([&] {
      // Statements are split on ';' ends of line; the schema has no ';' inside literals.
      std::string sql = kMigrations[v];
      size_t start = 0;
      while (start < sql.size()) {
        size_t end = sql.find(";", start);
        if (end == std::string::npos) end = sql.size();
        std::string stmt = sql.substr(start, end - start);
        if (stmt.find_first_not_of(" \n\t") != std::string::npos) db_->exec(stmt);
        start = end + 1;
      }
      db_->exec("PRAGMA user_version=" + std::to_string(v + 1));
    });
  }
}

void Store::adopt_default_host(const std::string& host) {
  db_->transaction([&] {
    for (const char* table : {"containers", "port_allocations", "port_rest"})
      db_->exec(std::string("UPDATE ") + table + " SET host=? WHERE host=''", {host});
  });
}

// ---- users ----

std::int64_t Store::add_user(const std::string& name, bool admin) {
  db_->exec("INSERT INTO users(name,is_admin,created_at) VALUES(?,?,?)",
            {name, std::int64_t(admin), iso_now()});
  return db_->last_insert_id();
}

std::optional<UserRecord> Store::find_user(const std::string& name) {
  auto rows = db_->query("SELECT id,name,is_admin FROM users WHERE name=?", {name});
  if (rows.empty()) return std::nullopt;
  return UserRecord{rows[0].i64(0), rows[0].str(1), rows[0].i64(2) != 0};
}

std::vector<UserRecord> Store::users() {
  std::vector<UserRecord> v;
  for (const auto& r : db_->query("SELECT id,name,is_admin FROM users ORDER BY id"))
    v.push_back(UserRecord{r.i64(0), r.str(1), r.i64(2) != 0});
  return v;
}

void Store::add_token(std::int64_t user_id, const std::string& token_sha256) {
  db_->exec("INSERT INTO tokens(user_id,token_sha256,created_at) VALUES(?,?,?)",
            {user_id, token_sha256, iso_now()});
}

std::optional<UserRecord> Store::user_for_token(const std::string& token_sha256) {
  auto rows = db_->query(
      "SELECT u.id,u.name,u.is_admin FROM tokens t JOIN users u ON u.id=t.user_id "
      "WHERE t.token_sha256=?",
      {token_sha256});
  if (rows.empty()) return std::nullopt;
  return UserRecord{rows[0].i64(0), rows[0].str(1), rows[0].i64(2) != 0};
}

int Store::revoke_token(const std::string& token_sha256) {
  db_->exec("DELETE FROM tokens WHERE token_sha256=?", {token_sha256});
  return db_->changes();
}

int Store::revoke_user_tokens(std::int64_t user_id) {
  db_->exec("DELETE FROM tokens WHERE user_id=?", {user_id});
  return db_->changes();
}

// ---- containers ----

std::int64_t Store::insert_container(const ContainerRecord& rec) {
  std::string now = iso_now();
  db_->exec(
      "INSERT INTO containers(name,owner,state,docker_id,spec,ssh_port,created_at,updated_at,"
      "host) VALUES(?,?,?,?,?,?,?,?,?)",
      {rec.name, rec.owner, rec.state, rec.docker_id, rec.spec.to_json().dump(),
       std::int64_t(rec.ssh_port), now, now, rec.host});
  return db_->last_insert_id();
}

ContainerRecord Store::container_from_row(const DbRow& r) {
  ContainerRecord c;
  c.id = r.i64(0);
  c.name = r.str(1);
  c.owner = r.str(2);
  c.state = r.str(3);
  c.docker_id = r.str(4);
  c.spec = ContainerSpec::from_json(Json::parse(r.str(5)));
  c.ssh_port = static_cast<int>(r.i64(6));
  c.created_at = r.str(7);
  c.updated_at = r.str(8);
  c.host = r.str(9);
  c.gpus = container_gpus(c.id, false);
  return c;
}

std::vector<GpuAssignment> Store::container_gpus(std::int64_t container_id, bool pending) {
  std::vector<GpuAssignment> v;
  for (const auto& g : db_->query(
           "SELECT gpu_uuid,gpu_index FROM gpu_allocations WHERE container_id=? AND pending=? "
           "ORDER BY gpu_index",
           {container_id, std::int64_t(pending ? 1 : 0)}))
    v.push_back(GpuAssignment{g.str(0), static_cast<int>(g.i64(1))});
  return v;
}

static const char* const kContainerCols =
    "SELECT id,name,owner,state,docker_id,spec,ssh_port,created_at,updated_at,host FROM "
    "containers ";

std::optional<ContainerRecord> Store::find_container(const std::string& name) {
  std::lock_guard<std::recursive_mutex> lock(db_->mutex());
  auto rows = db_->query(std::string(kContainerCols) + "WHERE name=?", {name});
  if (rows.empty()) return std::nullopt;
  return container_from_row(rows[0]);
}

std::optional<ContainerRecord> Store::find_container(std::int64_t id) {
  std::lock_guard<std::recursive_mutex> lock(db_->mutex());
  auto rows = db_->query(std::string(kContainerCols) + "WHERE id=?", {id});
  if (rows.empty()) return std::nullopt;
  return container_from_row(rows[0]);
}

std::vector<ContainerRecord> Store::containers(const std::optional<std::string>& owner) {
  std::lock_guard<std::recursive_mutex> lock(db_->mutex());
  std::vector<ContainerRecord> v;
  auto rows = owner
                  ? db_->query(std::string(kContainerCols) + "WHERE owner=? ORDER BY id", {*owner})
                  : db_->query(std::string(kContainerCols) + "ORDER BY id");
  for (const auto& r : rows) v.push_back(container_from_row(r));
  return v;
}

void Store::set_state(std::int64_t id, const std::string& st) {
  db_->exec("UPDATE containers SET state=?,updated_at=? WHERE id=?", {st, iso_now(), id});
}

void Store::set_docker_id(std::int64_t id, const std::string& docker_id) {
  db_->exec("UPDATE containers SET docker_id=?,updated_at=? WHERE id=?",
            {docker_id, iso_now(), id});
}

void Store::set_spec(std::int64_t id, const ContainerSpec& spec) {
  db_->exec("UPDATE containers SET spec=?,updated_at=? WHERE id=?",
            {spec.to_json().dump(), iso_now(), id});
}

void Store::set_ssh_port(std::int64_t id, int port) {
  db_->transaction([&] {
    auto c = find_container(id);
    if (!c || c->ssh_port == port) return;
    db_->exec(
        "INSERT OR REPLACE INTO port_rest(host,port,released_at) SELECT host,port,? FROM "
        "port_allocations WHERE container_id=? AND kind='ssh'",
        {unix_now_precise(), id});
    db_->exec("DELETE FROM port_allocations WHERE container_id=? AND kind='ssh'", {id});
    db_->exec("UPDATE containers SET ssh_port=?,updated_at=? WHERE id=?",
              {std::int64_t(port), iso_now(), id});
    if (port != 0) add_port(id, port, "ssh", 22);
  });
}

void Store::remove_container(std::int64_t id, bool rest_ports) {
  db_->transaction([&] {
    if (rest_ports) {
      db_->exec(
          "INSERT OR REPLACE INTO port_rest(host,port,released_at) "
          "SELECT host,port,? FROM port_allocations WHERE container_id=?",
          {unix_now_precise(), id});
    }
    db_->exec("DELETE FROM containers WHERE id=?", {id});  // allocations cascade
  });
}

// ---- allocations ----

void Store::add_gpu(std::int64_t container_id, const GpuAssignment& gpu) {
  db_->exec(
      "INSERT INTO gpu_allocations(gpu_uuid,gpu_index,container_id,allocated_at) VALUES(?,?,?,?)",
      {gpu.uuid, std::int64_t(gpu.index), container_id, iso_now()});
}

void Store::clear_gpus(std::int64_t container_id) {
  db_->exec("DELETE FROM gpu_allocations WHERE container_id=?", {container_id});
}

std::map<std::string, std::string> Store::gpu_holders() {
  std::map<std::string, std::string> m;
  for (const auto& r : db_->query("SELECT g.gpu_uuid,c.name FROM gpu_allocations g JOIN containers "
                                  "c ON c.id=g.container_id"))
    m[r.str(0)] = r.str(1);
  return m;
}

void Store::add_port(std::int64_t container_id, int port, const std::string& kind,
                     int container_port) {
  // The port is the container's host's: unique per host (the table's key).
  db_->exec(
      "INSERT INTO port_allocations(host,port,kind,container_port,container_id) "
      "VALUES((SELECT host FROM containers WHERE id=?),?,?,?,?)",
      {container_id, std::int64_t(port), kind, std::int64_t(container_port), container_id});
  db_->exec("DELETE FROM port_rest WHERE port=? AND host=(SELECT host FROM containers WHERE id=?)",
            {std::int64_t(port), container_id});
}

namespace {
// A WHERE clause part and its bind for "this host only" (nullopt: every host).
std::string host_cond(const std::optional<std::string>& host, std::vector<DbValue>& binds,
                      const char* col = "host") {
  if (!host) return " 1=1";
  binds.push_back(*host);
  return std::string(" ") + col + "=?";
}
}  // namespace

std::set<int> Store::unavailable_ports(int rest_seconds, const std::optional<std::string>& host) {
  std::set<int> s;
  std::vector<DbValue> b1;
  std::string c1 = host_cond(host, b1);
  for (const auto& r : db_->query("SELECT port FROM port_allocations WHERE" + c1, b1))
    s.insert(static_cast<int>(r.i64(0)));
  std::vector<DbValue> b2{unix_now_precise() - rest_seconds};
  std::string c2 = host_cond(host, b2);
  for (const auto& r : db_->query("SELECT port FROM port_rest WHERE released_at > ? AND" + c2, b2))
    s.insert(static_cast<int>(r.i64(0)));
  return s;
}

std::map<int, double> Store::resting_ports(int rest_seconds,
                                           const std::optional<std::string>& host) {
  std::map<int, double> m;
  double now = unix_now_precise();
  std::vector<DbValue> b{now - rest_seconds, now - rest_seconds};
  std::string c = host_cond(host, b);
  for (const auto& r :
       db_->query("SELECT port,CAST((released_at-?)*1000 AS INTEGER) FROM port_rest "
                  "WHERE released_at > ? AND" +
                      c,
                  b))
    m[static_cast<int>(r.i64(0))] = static_cast<double>(r.i64(1)) / 1000.0;
  return m;
}

std::map<int, std::string> Store::port_holders(const std::optional<std::string>& host) {
  std::map<int, std::string> m;
  std::vector<DbValue> b;
  std::string c = host_cond(host, b, "p.host");
  for (const auto& r : db_->query(
           "SELECT p.port,c.name FROM port_allocations p JOIN containers c ON c.id=p.container_id "
           "WHERE" +
               c,
           b))
    m[static_cast<int>(r.i64(0))] = r.str(1);
  return m;
}

void Store::release_ports(std::int64_t container_id, bool keep_ssh) {
  db_->transaction([&] {
    std::string cond = keep_ssh ? " AND kind<>'ssh'" : "";
    db_->exec(
        "INSERT OR REPLACE INTO port_rest(host,port,released_at) SELECT host,port,? FROM "
        "port_allocations WHERE container_id=?" +
            cond,
        {unix_now_precise(), container_id});
    db_->exec("DELETE FROM port_allocations WHERE container_id=?" + cond, {container_id});
  });
}

// ---- snapshots ----

void Store::add_snapshot(const SnapshotRecord& s) {
  db_->exec("INSERT INTO snapshots(name,owner,source,image,spec,created_at) VALUES(?,?,?,?,?,?)",
            {s.name, s.owner, s.source, s.image, s.spec.to_json().dump(), s.created_at});
}

static SnapshotRecord snapshot_from_row(const DbRow& r) {
  SnapshotRecord s;
  s.name = r.str(0);
  s.owner = r.str(1);
  s.source = r.str(2);
  s.image = r.str(3);
  s.spec = ContainerSpec::from_json(Json::parse(r.str(4)));
  s.created_at = r.str(5);
  return s;
}

std::optional<SnapshotRecord> Store::find_snapshot(const std::string& name) {
  auto rows = db_->query(
      "SELECT name,owner,source,image,spec,created_at FROM snapshots WHERE name=?", {name});
  if (rows.empty()) return std::nullopt;
  return snapshot_from_row(rows[0]);
}

std::vector<SnapshotRecord> Store::snapshots(const std::optional<std::string>& owner) {
  std::vector<SnapshotRecord> v;
  const std::string sql = "SELECT name,owner,source,image,spec,created_at FROM snapshots ";
  auto rows = owner ? db_->query(sql + "WHERE owner=? ORDER BY created_at,name", {*owner})
                    : db_->query(sql + "ORDER BY created_at,name");
  for (const auto& r : rows) v.push_back(snapshot_from_row(r));
  return v;
}

void Store::remove_snapshot(const std::string& name) {
  db_->exec("DELETE FROM snapshots WHERE name=?", {name});
}

// ---- backups ----

void Store::upsert_backup(const BackupRecord& b) {
  db_->exec(
      "INSERT OR REPLACE INTO backups(name,owner,source,file,state,sha256,message,bytes_total,"
      "bytes_done,created_at) VALUES(?,?,?,?,?,?,?,?,?,?)",
      {b.name, b.owner, b.source, b.file, b.state, b.sha256, b.message, b.bytes_total, b.bytes_done,
       b.created_at.empty() ? iso_now() : b.created_at});
}

static BackupRecord backup_from_row(const DbRow& r) {
  BackupRecord b;
  b.name = r.str(0);
  b.owner = r.str(1);
  b.source = r.str(2);
  b.file = r.str(3);
  b.state = r.str(4);
  b.sha256 = r.str(5);
  b.message = r.str(6);
  b.bytes_total = r.i64(7);
  b.bytes_done = r.i64(8);
  b.created_at = r.str(9);
  return b;
}

static const char* const kBackupCols =
    "SELECT name,owner,source,file,state,sha256,message,bytes_total,bytes_done,created_at "
    "FROM backups ";

std::optional<BackupRecord> Store::find_backup(const std::string& name) {
  auto rows = db_->query(std::string(kBackupCols) + "WHERE name=?", {name});
  if (rows.empty()) return std::nullopt;
  return backup_from_row(rows[0]);
}

std::vector<BackupRecord> Store::backups(const std::optional<std::string>& owner) {
  std::vector<BackupRecord> v;
  auto rows = owner
                  ? db_->query(std::string(kBackupCols) + "WHERE owner=? ORDER BY created_at,name",
                               {*owner})
                  : db_->query(std::string(kBackupCols) + "ORDER BY created_at,name");
  for (const auto& r : rows) v.push_back(backup_from_row(r));
  return v;
}

void Store::set_backup_progress(const std::string& name, std::int64_t done) {
  db_->exec("UPDATE backups SET bytes_done=? WHERE name=?", {done, name});
}

void Store::remove_backup(const std::string& name) {
  db_->exec("DELETE FROM backups WHERE name=?", {name});
}

// ---- audit ----

void Store::audit(const std::string& user, const std::string& action, const std::string& target,
                  const std::string& outcome, const std::string& detail) {
  db_->exec("INSERT INTO audit_log(at,user,action,target,outcome,detail) VALUES(?,?,?,?,?,?)",
            {iso_now(), user, action, target, outcome, detail});
}

Json Store::audit_tail(int n) {
  Json a = Json::array();
  for (const auto& r : db_->query(
           "SELECT at,user,action,target,outcome,detail FROM audit_log ORDER BY id DESC LIMIT ?",
           {std::int64_t(n)}))
    a.push_back({{"at", r.str(0)},
                 {"user", r.str(1)},
                 {"action", r.str(2)},
                 {"target", r.str(3)},
                 {"outcome", r.str(4)},
                 {"detail", r.str(5)}});
  return a;
}

}  // namespace gpulab::service
