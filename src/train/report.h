// The end-of-run report: one self-contained HTML file with inline SVG charts (loss, accuracy,
// throughput, learning rate per epoch) and a summary table; no scripts, no external files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "train/metrics.h"

namespace gpulab::train {

struct ReportInfo {
  std::string title;                                       // "resnet18 on fashion-mnist"
  std::vector<std::pair<std::string, std::string>> facts;  // summary rows (key, value)
};

std::string render_report(const ReportInfo& info, const std::vector<EpochRecord>& epochs);
void write_report(const std::filesystem::path& file, const ReportInfo& info,
                  const std::vector<EpochRecord>& epochs);

}  // namespace gpulab::train
