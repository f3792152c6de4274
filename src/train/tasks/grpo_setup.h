// What a GRPO run reads before it trains, from its options: the policy's shape and where its
// weights are, the tokenizer, the prompts (tokenized, chat prompts rendered), the reward, the
// sampling and the loss settings. The one home of GRPO's option checks (check_grpo_options), run
// by check_train_options before any rank starts, so bad input never starts N processes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "train/data/tokenizer.h"
#include "train/generate.h"
#include "train/models/causal_lm.h"
#include "train/models/decoder_config.h"
#include "train/rl/grpo_loss.h"
#include "train/rl/prompt_set.h"
#include "train/rl/reward.h"
#include "train/run_files.h"
#include "train/train_options.h"

namespace gpulab::train {

struct GrpoInputs {
  DecoderConfig config;               // vocab_size from the tokenizer for shapes that take data's
  std::optional<ModelFiles> weights;  // --weights, located (not read)
  std::string model_arg;              // --model when it names a language model, else empty
  std::string tokenizer_spec;
  std::unique_ptr<Tokenizer> tokenizer;
  rl::PromptSet prompts;
  std::vector<std::vector<int64_t>> prompt_ids;  // one per prompt, in file order
  std::shared_ptr<const rl::Reward> reward;
  rl::RewardFailurePolicy failure = rl::RewardFailurePolicy::kStop;
  rl::GrpoLossOptions loss;
  SamplingOptions sampling;  // eos_id the tokenizer's
};

// Reads and checks everything above (no weights are read). kInvalidArgument (or the file's own
// error: kNotFound, kDataError) with a hint: a malformed prompt line (FILE:LINE), an empty set, a
// prompt + --max_new_tokens beyond the model's positions (FILE:LINE), an unknown reward spec.
Result<GrpoInputs> open_grpo_inputs(const TrainOptions& o);

// The policy on `device`: --weights' model, read (its config replaces in.config), else in.config's
// shape, initialised from the seed. Training ranks and generation ranks build it alike.
CausalLmPtr build_grpo_policy(GrpoInputs& in, const torch::Device& device);

// Every check of --task grpo's options for `world_size` ranks (open_grpo_inputs, then the group
// size, the prompts per step against the set, --mu with --grad_accum).
Status check_grpo_options(const TrainOptions& o, int world_size);

// --shard full gathers each unit's parameters in its forward, a collective every rank must join
// the same number of times; colocated generation stops each rank's rows at their own EOS, so its
// ranks would disagree. Refused (kInvalidArgument) for --task grpo with colocated generation; with
// generation ranks of its own (--generation_gpus) the training ranks only train, so it runs.
Status check_grpo_sharding(const TrainOptions& o, const std::string& shard);

}  // namespace gpulab::train
