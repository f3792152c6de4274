// HTML + inline SVG training report.
#include "train/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "core/files.h"

namespace gpulab::train {

namespace {

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (epoch, value)
};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// At most `most` points: consecutive runs of points averaged (x and y), so a per-step series of
// a long run (a point per optimizer step) draws as a line a chart's width can show instead of
// an SVG of every step.
std::vector<std::pair<double, double>> thinned(const std::vector<std::pair<double, double>>& p,
                                               size_t most) {
  if (p.size() <= most) return p;
  std::vector<std::pair<double, double>> out;
  for (size_t b = 0; b < most; ++b) {
    const size_t lo = b * p.size() / most, hi = (b + 1) * p.size() / most;
    double x = 0, y = 0;
    for (size_t i = lo; i < hi; ++i) x += p[i].first, y += p[i].second;
    out.emplace_back(x / static_cast<double>(hi - lo), y / static_cast<double>(hi - lo));
  }
  return out;
}

// One line chart with axes, 5 y ticks, one polyline (and dots) per series, and a legend.
std::string chart(const std::string& title, const std::vector<Series>& series,
                  const std::string& x_name = "epoch") {
  constexpr double kW = 460, kH = 260, kL = 60, kR = 12, kT = 28, kB = 36;
  double x0 = std::numeric_limits<double>::max(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series)
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}">)"
      R"(<text x="{}" y="18" font-size="14" font-weight="bold">{}</text>)",
      kW, kH, kW, kH, kL, escape(title));
  if (x0 > x1) return svg + R"(<text x="60" y="130">no data</text></svg>)";
  if (x1 == x0) x0 -= 1, x1 += 1;
  // A quantity that cannot be negative (a learning rate, a rate, a loss) gets no axis below 0.
  const bool non_negative = y0 >= 0;
  if (y1 == y0) y0 -= std::abs(y0) * 0.1 + 1e-9, y1 += std::abs(y1) * 0.1 + 1e-9;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  if (non_negative) y0 = std::max(y0, 0.0);
  auto px = [&](double x) { return kL + (x - x0) / (x1 - x0) * (kW - kL - kR); };
  auto py = [&](double y) { return kH - kB - (y - y0) / (y1 - y0) * (kH - kT - kB); };
  svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#999"/>)",
                     kL, kT, kW - kL - kR, kH - kT - kB);
  for (int i = 0; i <= 4; ++i) {
    const double v = y0 + (y1 - y0) * i / 4;
    svg +=
        fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="#eee"/>)"
                    R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="end">{:.4g}</text>)",
                    kL, kW - kR, py(v), py(v), kL - 4, py(v) + 3, v);
  }
  svg += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="middle">{}</text>)",
                     (kL + kW - kR) / 2, kH - 6, escape(x_name));
  for (double x : {x0, x1})
    svg += fmt::format(
        R"(<text x="{:.1f}" y="{:.1f}" font-size="10" text-anchor="middle">{:g}</text>)", px(x),
        kH - kB + 14, x);
  double legend_x = kL + 8;
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    // A point a pixel across at most; dots only where they stay apart.
    const auto points = thinned(s.points, 400);
    std::string pts;
    for (auto [x, y] : points) pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    svg += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="2" points="{}"/>)",
                       s.color, pts);
    if (points.size() <= 100)
      for (auto [x, y] : points)
        svg += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="2.5" fill="{}"/>)", px(x), py(y),
                           s.color);
    svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="10" height="10" fill="{}"/>)"
                       R"(<text x="{:.1f}" y="{}" font-size="11">{}</text>)",
                       legend_x, kT + 6, s.color, legend_x + 14, kT + 15, escape(s.name));
    legend_x += 24 + 7.0 * static_cast<double>(s.name.size());
  }
  return svg + "</svg>";
}

std::string html_head(const ReportInfo& info) {
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gpulab train: {0}</title>"
      "<style>body{{font-family:sans-serif;margin:24px}}table{{border-collapse:collapse}}"
      "td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}"
      "td:first-child{{text-align:left}}.charts svg{{margin:8px}}</style></head><body>\n"
      "<h1>gpulab train: {0}</h1>\n<table>\n",
      escape(info.title));
  for (const auto& [k, v] : info.facts)
    html += fmt::format("<tr><td>{}</td><td>{}</td></tr>\n", escape(k), escape(v));
  return html + "</table>\n<div class=\"charts\">\n";
}

std::string opt4(const std::optional<double>& v) {
  return v ? fmt::format("{:.4f}", *v) : std::string("");
}

// An image classifier: accuracy with top-1 and top-5, images per second.
std::string image_sections(const std::vector<EpochRecord>& epochs) {
  Series train_loss{"train loss", "#1f77b4", {}}, test_loss{"test loss", "#d62728", {}};
  Series train_acc{"train acc", "#1f77b4", {}}, top1{"test top-1", "#d62728", {}},
      top5{"test top-5", "#2ca02c", {}};
  Series ips{"images/s", "#9467bd", {}}, lr{"learning rate", "#8c564b", {}};
  for (const auto& e : epochs) {
    const double x = static_cast<double>(e.epoch);
    train_loss.points.emplace_back(x, e.train_loss);
    train_acc.points.emplace_back(x, e.train_acc);
    ips.points.emplace_back(x, e.images_per_s);
    lr.points.emplace_back(x, e.lr);
    if (e.test_top1) {
      test_loss.points.emplace_back(x, *e.test_loss);
      top1.points.emplace_back(x, *e.test_top1);
      top5.points.emplace_back(x, *e.test_top5);
    }
  }
  std::string html = chart("Loss", {train_loss, test_loss}) + "\n" +
                     chart("Accuracy", {train_acc, top1, top5}) + "\n" +
                     chart("Throughput (images/s)", {ips}) + "\n" +
                     chart("Learning rate (end of epoch)", {lr}) + "\n</div>\n";
  html +=
      "<h2>Epochs</h2>\n<table><tr><th>epoch</th><th>time s</th><th>data s</th><th>train loss</th>"
      "<th>train acc</th><th>images/s</th><th>lr</th><th>test top-1</th><th>test top-5</th></tr>\n";
  for (const auto& e : epochs)
    html += fmt::format(
        "<tr><td>{}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.1f}</td>"
        "<td>{:.6g}</td><td>{}</td><td>{}</td></tr>\n",
        e.epoch, e.time_s, e.data_time_s, e.train_loss, e.train_acc, e.images_per_s, e.lr,
        opt4(e.test_top1), opt4(e.test_top5));
  return html + "</table>\n";
}

// A language model: loss, perplexity and bits per byte, tokens per second, TFLOPS and MFU.
std::string lm_sections(const std::vector<EpochRecord>& epochs) {
  Series train_loss{"train loss", "#1f77b4", {}}, val_loss{"validation loss", "#d62728", {}};
  Series ppl{"validation perplexity", "#d62728", {}}, bpb{"bits per byte", "#2ca02c", {}};
  Series tps{"tokens/s", "#9467bd", {}}, mfu{"MFU %", "#17becf", {}};
  Series lr{"learning rate", "#8c564b", {}};
  for (const auto& e : epochs) {
    const double x = static_cast<double>(e.epoch);
    const auto& lm = *e.lm;
    train_loss.points.emplace_back(x, e.train_loss);
    tps.points.emplace_back(x, lm.tokens_per_s);
    mfu.points.emplace_back(x, 100 * lm.mfu);
    lr.points.emplace_back(x, e.lr);
    if (e.test_loss) {
      val_loss.points.emplace_back(x, *e.test_loss);
      ppl.points.emplace_back(x, std::exp(*e.test_loss));
    }
    if (lm.val_bits_per_byte) bpb.points.emplace_back(x, *lm.val_bits_per_byte);
  }
  std::string html = chart("Loss (nats per token)", {train_loss, val_loss}) + "\n" +
                     chart("Validation perplexity", {ppl}) + "\n";
  if (!bpb.points.empty()) html += chart("Validation bits per byte", {bpb}) + "\n";
  html += chart("Throughput (tokens/s)", {tps}) + "\n" + chart("MFU (%)", {mfu}) + "\n" +
          chart("Learning rate (end of epoch)", {lr}) + "\n</div>\n";
  html +=
      "<h2>Epochs</h2>\n<table><tr><th>epoch</th><th>step</th><th>time s</th><th>train loss</th>"
      "<th>val loss</th><th>perplexity</th><th>bits/byte</th><th>next-token acc</th>"
      "<th>tokens/s</th><th>TFLOPS/device</th><th>MFU</th><th>lr</th></tr>\n";
  for (const auto& e : epochs) {
    const auto& lm = *e.lm;
    html += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.4f}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td><td>{:.0f}</td><td>{:.3f}</td><td>{:.1f}%</td><td>{:.6g}</td></tr>\n",
        e.epoch, e.step, e.time_s, e.train_loss, opt4(e.test_loss),
        e.test_loss ? fmt::format("{:.2f}", std::exp(*e.test_loss)) : "",
        opt4(lm.val_bits_per_byte), opt4(e.test_top1), lm.tokens_per_s, lm.tflops_per_device,
        100 * lm.mfu, e.lr);
  }
  return html + "</table>\n";
}

}  // namespace

std::string render_report(const ReportInfo& info, const std::vector<EpochRecord>& epochs) {
  const bool lm = !epochs.empty() && std::all_of(epochs.begin(), epochs.end(),
                                                 [](const EpochRecord& e) { return e.lm; });
  std::string steps;
  for (const StepChart& c : info.step_charts)
    steps += chart(c.title, {{c.title, "#1f77b4", c.points}}, "step") + "\n";
  return html_head(info) + steps + (lm ? lm_sections(epochs) : image_sections(epochs)) +
         "</body></html>\n";
}

std::vector<std::pair<std::string, std::string>> best_result_facts(
    const std::vector<EpochRecord>& epochs) {
  std::optional<EpochRecord> best;
  const bool lm = !epochs.empty() && epochs.back().lm;
  for (const auto& e : epochs) {
    if (!e.test_loss) continue;
    const bool better = !best || (lm ? *e.test_loss < *best->test_loss
                                     : e.test_top1.value_or(0) > best->test_top1.value_or(0));
    if (better) best = e;
  }
  if (!best) return {};
  if (!lm) return {{"best test top-1", fmt::format("{:.4f}", best->test_top1.value_or(0))}};
  std::vector<std::pair<std::string, std::string>> facts{
      {"best validation loss",
       fmt::format("{:.4f} nats/token (perplexity {:.2f}, epoch {})", *best->test_loss,
                   std::exp(*best->test_loss), best->epoch)}};
  if (best->lm->val_bits_per_byte)
    facts.emplace_back("bits per byte", fmt::format("{:.4f}", *best->lm->val_bits_per_byte));
  facts.emplace_back(
      "tokens/s, MFU (last epoch)",
      fmt::format("{:.0f}, {:.1f}%", epochs.back().lm->tokens_per_s, 100 * epochs.back().lm->mfu));
  return facts;
}

void write_report(const std::filesystem::path& file, const ReportInfo& info,
                  const std::vector<EpochRecord>& epochs) {
  if (auto st = write_file_atomic(file, render_report(info, epochs)); !st)
    throw Exception(st.error());
}

}  // namespace gpulab::train
