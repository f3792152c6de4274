// A thin RAII layer over the SQLite C API: one connection, prepared statements with typed binds,
// and transactions that roll back when their body throws.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/result.h"

namespace gpulab::service {

using DbValue = std::variant<std::nullptr_t, std::int64_t, double, std::string>;

// One result row; columns by position.
struct DbRow {
  std::vector<DbValue> cols;
  std::int64_t i64(size_t c) const;
  std::string str(size_t c) const;  // "" for NULL
  bool is_null(size_t c) const { return std::holds_alternative<std::nullptr_t>(cols.at(c)); }
};

class Db {
 public:
  // Opens (creating) the file, WAL journal, foreign keys on, a busy timeout for other processes.
  static Result<std::unique_ptr<Db>> open(const std::string& path);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one statement with positional binds; throws Exception(kInternal) on SQLite errors,
  // except constraint violations, which throw Exception(kAlreadyExists) (unique keys).
  std::vector<DbRow> query(const std::string& sql, const std::vector<DbValue>& binds = {});
  void exec(const std::string& sql, const std::vector<DbValue>& binds = {}) { query(sql, binds); }
  std::int64_t last_insert_id() const;
  int changes() const;

  // Runs fn inside BEGIN IMMEDIATE ... COMMIT, holding the connection's lock; rolls back if fn
  // throws. Nested calls run inside the outer transaction.
  template <typename Fn>
  auto transaction(Fn&& fn) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (depth_ > 0) return fn();
    begin();
    ++depth_;
    try {
      if constexpr (std::is_void_v<decltype(fn())>) {
        fn();
        --depth_;
        commit();
      } else {
        auto r = fn();
        --depth_;
        commit();
        return r;
      }
    } catch (...) {
      --depth_;
      rollback();
      throw;
    }
  }

  std::recursive_mutex& mutex() { return mu_; }

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  void begin();
  void commit();
  void rollback();
  sqlite3* db_;
  std::recursive_mutex mu_;
  int depth_ = 0;
};

}  // namespace gpulab::service
