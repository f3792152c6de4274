// The flags a resumed run must keep, and the message when one changed.
#include "train/resume_check.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gpulab::train {
namespace {

// Flags whose change makes another run: other weights, data, batches or numerics.
constexpr const char* kMeaning[] = {"model",      "dataset",    "data_dir",   "seq_len",
                                    "batch_size", "grad_accum", "precision",  "input_size",
                                    "subset",     "optimizer",  "lr_schedule"};

std::string flag_value_text(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

Status changed_flag_error(const std::string& flag, const Json& was, const Json& now,
                          const std::string& checkpoint, const std::string& why) {
  return Error{Code::kInvalidArgument,
               fmt::format("--{} {} differs from the run being resumed ({} {} in {}){}", flag,
                           flag_value_text(now), flag, flag_value_text(was), checkpoint, why),
               fmt::format("pass --{} {} to resume it, or start a new run in another --output_dir "
                           "(--init_weights THIS_RUN_DIR starts it from this run's weights)",
                           flag, flag_value_text(was))};
}

}  // namespace

Status check_resume_options(const Json& saved, const Json& now, const std::string& checkpoint) {
  if (!saved.is_object()) return ok_status();
  for (const char* flag : kMeaning) {
    if (!saved.contains(flag) || !now.contains(flag) || saved[flag] == now[flag]) continue;
    return changed_flag_error(flag, saved[flag], now[flag], checkpoint, "");
  }
  // A cosine schedule spans the run's epochs: more (or fewer) epochs would bend the rest of its
  // curve (a finished run sits at learning rate 0). Step and constant schedules do not depend
  // on the length, so more epochs continue them exactly as a longer run would have.
  if (saved.contains("num_epochs") && now.contains("num_epochs") &&
      saved["num_epochs"] != now["num_epochs"] && now.value("lr_schedule", "") == "cosine")
    return changed_flag_error("num_epochs", saved["num_epochs"], now["num_epochs"], checkpoint,
                              ": the cosine learning-rate schedule spans the run's epochs");
  return ok_status();
}

}  // namespace gpulab::train
