// Hour-bucket GPU-second accounting in the gpu_usage and meter_state tables.
#include "service/ops/policies/usage_meter.h"

#include <algorithm>
#include <cmath>

#include "service/base/metrics.h"

namespace gpulab::service {

namespace {

constexpr double kHour = 3600;
// A meter that was off longer than this (a stopped service) charges only the last part of it.
constexpr double kMaxGapSeconds = 366 * 24 * kHour;

}  // namespace

void meter_tick(Store& store, double now) {
  store.transaction([&] {
    Db& db = store.db();
    auto last_rows = db.query("SELECT last_tick FROM meter_state WHERE id=1");
    if (last_rows.empty()) {
      db.exec("INSERT INTO meter_state(id,last_tick) VALUES(1,?)", {now});
      return;
    }
    const auto& v = last_rows[0].cols[0];
    double last = std::holds_alternative<double>(v) ? std::get<double>(v)
                                                    : static_cast<double>(last_rows[0].i64(0));
    if (now <= last) return;  // a clock that went back charges nothing twice
    last = std::max(last, now - kMaxGapSeconds);
    auto holders = db.query(
        "SELECT c.owner,c.name,COUNT(g.gpu_uuid) FROM containers c JOIN gpu_allocations g ON "
        "g.container_id=c.id AND g.pending=0 GROUP BY c.id");  // a move's target: not yet
    for (double t = last; t < now;) {
      double bucket = std::floor(t / kHour) * kHour;
      double next = std::min(now, bucket + kHour);
      for (const auto& h : holders) {
        double seconds = (next - t) * static_cast<double>(h.i64(2));
        db.exec(
            "INSERT INTO gpu_usage(user,container,hour,gpu_seconds) VALUES(?,?,?,?) ON "
            "CONFLICT(user,container,hour) DO UPDATE SET gpu_seconds=gpu_seconds+excluded."
            "gpu_seconds",
            {h.str(0), h.str(1), static_cast<std::int64_t>(bucket), seconds});
      }
      t = next;
    }
    db.exec("UPDATE meter_state SET last_tick=? WHERE id=1", {now});
    db.exec("DELETE FROM gpu_usage WHERE hour<?",
            {static_cast<std::int64_t>(now - kMaxGapSeconds)});
  });
}

double gpu_seconds_since(Store& store, const std::string& user, double since) {
  auto rows = store.db().query(
      "SELECT COALESCE(SUM(gpu_seconds),0) FROM gpu_usage WHERE user=? AND hour+3600>?",
      {user, since});
  const auto& v = rows[0].cols[0];
  return std::holds_alternative<double>(v) ? std::get<double>(v)
                                           : static_cast<double>(rows[0].i64(0));
}

std::string usage_metrics(Store& store, const std::optional<std::string>& only_user) {
  std::string out =
      metric_header("gpulab_gpu_seconds_total", "counter", "GPU-seconds held, by user");
  std::string where = only_user ? " WHERE u.user=?" : "";
  std::vector<DbValue> binds;
  if (only_user) binds.push_back(*only_user);
  for (const auto& r : store.db().query(
           "SELECT u.user,SUM(u.gpu_seconds) FROM gpu_usage u" + where + " GROUP BY u.user", binds))
    out +=
        gauge_line("gpulab_gpu_seconds_total", {{"user", r.str(0)}}, std::get<double>(r.cols[1]));
  out += metric_header("gpulab_container_gpu_seconds_total", "counter",
                       "GPU-seconds held, by container in the book and its owner");
  for (const auto& r : store.db().query(
           "SELECT u.user,u.container,SUM(u.gpu_seconds) FROM gpu_usage u JOIN containers c ON "
           "c.name=u.container AND c.owner=u.user" +
               where + " GROUP BY u.user,u.container",
           binds))
    out += gauge_line("gpulab_container_gpu_seconds_total",
                      {{"user", r.str(0)}, {"container", r.str(1)}}, std::get<double>(r.cols[2]));
  return out;
}

}  // namespace gpulab::service
