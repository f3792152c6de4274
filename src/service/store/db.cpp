// SQLite connection, statements and transactions for the service's store.
#include "service/store/db.h"

#include <filesystem>
#include <memory>

namespace gpulab::service {

std::int64_t DbRow::i64(size_t c) const {
  const auto& v = cols.at(c);
  if (auto p = std::get_if<std::int64_t>(&v)) return *p;
  if (auto d = std::get_if<double>(&v)) return static_cast<std::int64_t>(*d);
  if (auto s = std::get_if<std::string>(&v)) return std::stoll(*s);
  return 0;
}

std::string DbRow::str(size_t c) const {
  const auto& v = cols.at(c);
  if (auto s = std::get_if<std::string>(&v)) return *s;
  if (auto p = std::get_if<std::int64_t>(&v)) return std::to_string(*p);
  if (auto d = std::get_if<double>(&v)) return std::to_string(*d);
  return {};
}

Result<std::unique_ptr<Db>> Db::open(const std::string& path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : "out of memory";
    if (raw) sqlite3_close(raw);
    return Error{Code::kUnavailable, "cannot open database " + path + ": " + msg,
                 "check --db and that its folder is writable"};
  }
  std::unique_ptr<Db> db(new Db(raw));
  sqlite3_busy_timeout(raw, 10000);
  try {
    // WAL: readers never block the writer, and a crash loses at most uncommitted transactions.
    db->exec("PRAGMA journal_mode=WAL");
    db->exec("PRAGMA synchronous=NORMAL");
    db->exec("PRAGMA foreign_keys=ON");
  } catch (const Exception& e) {
    return e.error();
  }
  return db;
}

Db::~Db() {
  sqlite3_close(db_);
}

std::vector<DbRow> Db::query(const std::string& sql, const std::vector<DbValue>& binds) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    throw Exception(Code::kInternal,
                    std::string("database: ") + sqlite3_errmsg(db_) + " in: " + sql);
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> guard(stmt, sqlite3_finalize);
  for (size_t i = 0; i < binds.size(); ++i) {
    int idx = static_cast<int>(i + 1);
    const auto& b = binds[i];
    if (std::holds_alternative<std::nullptr_t>(b)) {
      sqlite3_bind_null(stmt, idx);
    } else if (auto p = std::get_if<std::int64_t>(&b)) {
      sqlite3_bind_int64(stmt, idx, *p);
    } else if (auto d = std::get_if<double>(&b)) {
      sqlite3_bind_double(stmt, idx, *d);
    } else {
      const auto& s = std::get<std::string>(b);
      sqlite3_bind_text(stmt, idx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    }
  }
  std::vector<DbRow> rows;
  for (;;) {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      int ext = sqlite3_extended_errcode(db_);
      std::string msg = sqlite3_errmsg(db_);
      if ((ext & 0xff) == SQLITE_CONSTRAINT) throw Exception(Code::kAlreadyExists, msg);
      throw Exception(Code::kInternal, "database: " + msg);
    }
    DbRow row;
    int n = sqlite3_column_count(stmt);
    for (int c = 0; c < n; ++c) {
      switch (sqlite3_column_type(stmt, c)) {
        case SQLITE_INTEGER:
          row.cols.emplace_back(std::int64_t(sqlite3_column_int64(stmt, c)));
          break;
        case SQLITE_FLOAT:
          row.cols.emplace_back(sqlite3_column_double(stmt, c));
          break;
        case SQLITE_NULL:
          row.cols.emplace_back(nullptr);
          break;
        default: {
          auto* t = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
          row.cols.emplace_back(std::string(t ? t : "", sqlite3_column_bytes(stmt, c)));
        }
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::int64_t Db::last_insert_id() const {
  return sqlite3_last_insert_rowid(db_);
}
int Db::changes() const {
  return sqlite3_changes(db_);
}

void Db::begin() {
  query("BEGIN IMMEDIATE");
}
void Db::commit() {
  query("COMMIT");
}
void Db::rollback() {
  // A failed ROLLBACK (no transaction left) must not hide the original error.
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

}  // namespace gpulab::service
