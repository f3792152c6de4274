// Reads a Chrome trace from the libtorch profiler and sums each op's self time (its duration
// minus its nested children on the same thread): the table `gpulab bench train --profile`
// prints, so the heaviest kernels show without opening the trace. A trace with a GPU's kernels
// (Kineto's "kernel", "gpu_memcpy", "gpu_memset") ranks those, the device's time; else the host's
// ops ("cpu_op", or every span of a trace without categories).
#include <algorithm>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "bench/trace_summary.h"
#include "core/error.h"

namespace gpulab::bench {

namespace {

struct Span {
  std::string name;
  double ts = 0, dur = 0;
};

struct OpTotal {
  double self_us = 0;
  int64_t calls = 0;
};

// Self time of the spans of one thread: spans nest (a parent starts first and ends last).
void add_self_times(std::vector<Span>& spans, std::map<std::string, OpTotal>& totals) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur;
  });
  std::vector<std::pair<const Span*, double>> stack;  // span, children's time so far
  auto close = [&] {
    const auto [s, children] = stack.back();
    stack.pop_back();
    auto& t = totals[s->name];
    t.self_us += std::max(0.0, s->dur - children);
    ++t.calls;
    if (!stack.empty()) stack.back().second += s->dur;
  };
  for (const auto& s : spans) {
    while (!stack.empty() && s.ts >= stack.back().first->ts + stack.back().first->dur) close();
    stack.emplace_back(&s, 0.0);
  }
  while (!stack.empty()) close();
}

bool device_work(const std::string& cat) {
  return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
}

bool is_span(const Json& e) {
  return e.is_object() && e.value("ph", "") == "X" && e.contains("dur") && e["dur"].is_number() &&
         e.contains("ts") && e["ts"].is_number();
}

// Whether span e counts: a GPU's work in a trace that has some (`gpu`), else the host's ops.
bool counted(const Json& e, bool gpu) {
  if (gpu) return device_work(e.value("cat", ""));
  return !e.contains("cat") || e.value("cat", "") == "cpu_op";
}

}  // namespace

Json summarize_trace(const std::string& trace_file, int top) {
  std::ifstream in(trace_file);
  if (!in)
    throw Exception(Code::kNotFound, "cannot read the profile " + trace_file,
                    "check that its folder exists and is writable");
  Json doc = Json::parse(in, nullptr, /*allow_exceptions=*/false);
  const Json& events = doc.is_object() && doc.contains("traceEvents") ? doc["traceEvents"] : doc;
  if (!events.is_array())
    throw Exception(Code::kDataError, "the profile " + trace_file + " is not a Chrome trace",
                    "write it again with --profile");
  std::map<std::string, std::vector<Span>> threads;
  const bool gpu = std::any_of(events.begin(), events.end(), [](const Json& e) {
    return is_span(e) && device_work(e.value("cat", ""));
  });
  for (const auto& e : events) {
    if (!is_span(e) || !counted(e, gpu)) continue;
    const std::string key = e.value("pid", Json()).dump() + "/" + e.value("tid", Json()).dump();
    threads[key].push_back({e.value("name", "?"), e["ts"].get<double>(), e["dur"].get<double>()});
  }
  std::map<std::string, OpTotal> totals;
  for (auto& [key, spans] : threads) add_self_times(spans, totals);
  std::vector<std::pair<std::string, OpTotal>> rows(totals.begin(), totals.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  Json out = Json::array();
  for (int i = 0; i < top && i < static_cast<int>(rows.size()); ++i)
    out.push_back({{"name", rows[static_cast<size_t>(i)].first},
                   {"self_ms", rows[static_cast<size_t>(i)].second.self_us / 1000.0},
                   {"calls", rows[static_cast<size_t>(i)].second.calls},
                   {"on", gpu ? "gpu" : "cpu"}});
  return out;
}

std::string trace_table(const std::string& trace_file, const Json& top) {
  const bool gpu = !top.empty() && top[0].value("on", "") == "gpu";
  std::string s =
      "Profile (Chrome trace): " + trace_file +
      (gpu ? "\nHeaviest GPU kernels and copies by time:\n" : "\nHeaviest ops by self time:\n");
  for (const auto& op : top)  // CUDA kernels' template names run to hundreds of characters
    s += fmt::format("  {:>10.1f} ms {:>7} calls  {:.120}\n", op["self_ms"].get<double>(),
                     op["calls"].get<int64_t>(), op["name"].get<std::string>());
  return s;
}

}  // namespace gpulab::bench
