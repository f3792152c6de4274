// Token batches for language-model training in the trainer: (inputs, targets) B x T int64
// windows, chosen from (seed, micro-batch index, rank) alone so that a resumed run sees the same
// data as an uninterrupted one. Sources: the token files of `gpulab data tokenize` (--dataset text)
// and a synthetic stream with learnable structure (--dataset synthetic-text) for tests and benches.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

namespace gpulab::train {

struct LmBatch {
  torch::Tensor inputs, targets;  // B x T, int64
};

struct LmDataOptions {
  int64_t batch_size = 8;  // per process
  int64_t seq_len = 256;
  int rank = 0, world_size = 1;
  uint64_t seed = 0;
};

class LmBatches {
 public:
  virtual ~LmBatches() = default;
  virtual std::string name() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Bytes of text per token (for bits per byte); 0 when the source has no text behind it.
  virtual double bytes_per_token() const = 0;
  // The tokenizer spec (data/tokenizer.h) the tokens were made with; empty when none (synthetic).
  virtual std::string tokenizer_spec() const = 0;
  // Batches per epoch on this process (one pass over the training tokens' worth of windows).
  virtual int64_t train_batches() const = 0;
  // Micro-batch `index` of the run (counted over epochs: epoch * batches per epoch + batch).
  virtual LmBatch train_batch(int64_t index) = 0;
  // Validation: a fixed set of windows, split between ranks.
  virtual int64_t val_batches() const = 0;
  virtual LmBatch val_batch(int64_t index) const = 0;
};

// --dataset text (token files in data_dir) or synthetic-text. Throws gpulab::Exception
// (invalid input) for anything else, or a token file shorter than one window.
std::unique_ptr<LmBatches> open_lm_batches(const std::string& dataset, const std::string& data_dir,
                                           const LmDataOptions& opts);

bool is_text_dataset(const std::string& dataset);

}  // namespace gpulab::train
