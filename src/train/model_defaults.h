// Defaults of `gpulab train` that depend on the kind of model. The flags' own defaults are the
// seed's, made for image classifiers (SGD, lr 1e-3, no schedule); a language model trained that
// way barely moves, so for one the flags the user did not pass take the usual decoder
// pre-training recipe instead (GPT-3, Llama): AdamW, linear warm-up then cosine decay, global
// gradient-norm clipping at 1.0, weight decay 0.1 (norms and the token table excluded by the
// optimizer's groups), and a learning rate by model width.
#pragma once

#include <set>
#include <string>

#include "train/train_options.h"

namespace gpulab::train {

// Fills in, for a language model (--model llama-* or a config.json), every optimization flag
// not in `given` (flag names without dashes, e.g. "learning_rate"), and records what it set in
// o.model_defaults for the header line. Image models, and flags in `given`, are left alone.
// A config.json that does not load keeps the seed's values: the trainer reports that error.
void apply_model_defaults(TrainOptions& o, const std::set<std::string>& given);

// The learning rate a language model of this width starts from: 3e-3 up to 512 wide (llama-tiny),
// 6e-4 up to 1024 (GPT-3 Small / Medium's), 3e-4 beyond (Llama 3 8B's peak).
double language_model_learning_rate(int64_t hidden_size);

}  // namespace gpulab::train
