// The end-of-run report: one self-contained HTML file with inline SVG charts (loss, accuracy,
// throughput, learning rate per epoch) and a summary table; no scripts, no external files.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/json.h"
#include "train/metrics.h"

namespace gpulab::train {

// A curve per optimizer step (a task's step records: GRPO's reward, KL, ...).
struct StepChart {
  std::string title;
  std::vector<std::pair<double, double>> points;  // (step, value)
};

struct ReportInfo {
  std::string title;                                       // "resnet18 on fashion-mnist"
  std::vector<std::pair<std::string, std::string>> facts;  // summary rows (key, value)
  std::vector<StepChart> step_charts{};                    // drawn before the epoch charts
};

// A language model's report speaks of tokens, perplexity, bits per byte and MFU; an image
// classifier's of images and top-1 / top-5.
std::string render_report(const ReportInfo& info, const std::vector<EpochRecord>& epochs);
// The summary rows of the best epoch: validation loss (perplexity, bits per byte) for a language
// model, test top-1 for an image classifier; none before any evaluation.
std::vector<std::pair<std::string, std::string>> best_result_facts(
    const std::vector<EpochRecord>& epochs);
void write_report(const std::filesystem::path& file, const ReportInfo& info,
                  const std::vector<EpochRecord>& epochs);

}  // namespace gpulab::train
