// Tests the profile's table (bench/trace_summary.h) on traces written here in the two shapes the
// libtorch profilers write: Kineto's (an object of categorised events; a GPU's kernels ranked
// when there are any, else the host's ops, never the whole-trace span) and a list of events
// without categories; self time is a span's time less its nested children's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "bench/trace_summary.h"
#include "core/error.h"
#include "core/json.h"

using namespace gpulab;
namespace fs = std::filesystem;

namespace {

Json span(const std::string& name, const std::string& cat, double ts, double dur, int tid = 1) {
  Json e{{"ph", "X"}, {"name", name}, {"ts", ts}, {"dur", dur}, {"pid", 1}, {"tid", tid}};
  if (!cat.empty()) e["cat"] = cat;
  return e;
}

fs::path written(const Json& doc, const std::string& tag) {
  const fs::path f = fs::temp_directory_path() /
                     ("gpulab-trace-" + tag + "-" + std::to_string(::getpid()) + ".json");
  std::ofstream(f) << doc.dump();
  return f;
}

// A host op (1000 us, 600 of them in a child op) that launched two kernels on stream 7.
Json host_ops() {
  return Json::array({span("PyTorch Profiler (0)", "Trace", 0, 5000),
                      span("aten::linear", "cpu_op", 10, 1000), span("aten::mm", "cpu_op", 20, 600),
                      span("cudaLaunchKernel", "cuda_runtime", 30, 5)});
}

TEST(TraceSummary, AGpuTraceRanksItsKernelsAndCopiesByTime) {
  Json events = host_ops();
  events.push_back(span("sm90_xmma_gemm_bf16", "kernel", 40, 300, 7));
  events.push_back(span("sm90_xmma_gemm_bf16", "kernel", 400, 350, 7));
  events.push_back(span("Memcpy DtoH", "gpu_memcpy", 800, 900, 7));
  const auto f = written(Json{{"traceEvents", events}}, "gpu");
  const Json top = bench::summarize_trace(f.string());
  fs::remove(f);
  ASSERT_EQ(top.size(), 2u) << top.dump();
  EXPECT_EQ(top[0]["name"], "Memcpy DtoH");
  EXPECT_DOUBLE_EQ(top[0]["self_ms"].get<double>(), 0.9);
  EXPECT_EQ(top[1]["name"], "sm90_xmma_gemm_bf16");
  EXPECT_DOUBLE_EQ(top[1]["self_ms"].get<double>(), 0.65);
  EXPECT_EQ(top[1]["calls"], 2);
  EXPECT_EQ(top[1]["on"], "gpu");
  EXPECT_NE(bench::trace_table(f.string(), top).find("Heaviest GPU kernels"), std::string::npos);
}

TEST(TraceSummary, AHostTraceRanksItsOpsBySelfTimeLeavingOutTheWholeTraceSpan) {
  const auto f = written(Json{{"traceEvents", host_ops()}}, "cpu");
  const Json top = bench::summarize_trace(f.string());
  fs::remove(f);
  ASSERT_EQ(top.size(), 2u) << top.dump();
  EXPECT_EQ(top[0]["name"], "aten::mm");
  EXPECT_DOUBLE_EQ(top[0]["self_ms"].get<double>(), 0.6);
  EXPECT_EQ(top[1]["name"], "aten::linear");
  EXPECT_DOUBLE_EQ(top[1]["self_ms"].get<double>(), 0.4);  // 1000 us less its child's 600
  EXPECT_EQ(top[1]["on"], "cpu");
}

TEST(TraceSummary, AListWithoutCategoriesCountsEverySpan) {
  const auto f = written(Json::array({span("a", "", 0, 100), span("b", "", 10, 30)}), "list");
  const Json top = bench::summarize_trace(f.string());
  fs::remove(f);
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0]["name"], "a");
  EXPECT_DOUBLE_EQ(top[0]["self_ms"].get<double>(), 0.07);
}

TEST(TraceSummary, AFileThatIsNoTraceIsADataErrorAndMalformedSpansAreSkipped) {
  const auto bad = written(Json{{"traceEvents", 3}}, "bad");
  try {
    bench::summarize_trace(bad.string());
    ADD_FAILURE() << "a trace without a list of events was read";
  } catch (const Exception& e) {
    EXPECT_EQ(e.error().code, Code::kDataError);
  }
  fs::remove(bad);
  Json odd = Json::array({span("kept", "", 0, 10)});
  odd.push_back(Json{{"ph", "X"}, {"name", "ts is text"}, {"ts", "0"}, {"dur", 5}});
  const auto f = written(odd, "odd");
  const Json top = bench::summarize_trace(f.string());
  fs::remove(f);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0]["name"], "kept");
}

}  // namespace
