// What `--resume` may change: a resumed run continues the same run, so a flag that alters its
// meaning (model, data, sequence length, batch, precision, shard layout, and the length of a
// schedule that depends on it) must equal the checkpoint's; others (threads, logging) may differ.
#pragma once

#include <string>

#include "core/json.h"
#include "core/result.h"

namespace gpulab::train {

// `saved` and `now` are options_to_json objects; a key missing from `saved` (an
// older checkpoint) is not compared. The error names the flag, both values and how to start a
// new run instead.
Status check_resume_options(const Json& saved, const Json& now, const std::string& checkpoint);

}  // namespace gpulab::train
