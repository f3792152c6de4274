// Token batch sources for the trainer (see lm_batches.h).
#include "train/lm_batches.h"

#include <optional>

#include "core/error.h"
#include "train/data/token_file.h"
#include "train/data/token_windows.h"

namespace gpulab::train {
namespace {

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A stream a model can learn: each token follows from the one before by a fixed rule three
// times in four, else is random. An ideal model reaches about 0.25 * ln(256) + 0.56 = 1.9 nats.
class SyntheticText : public LmBatches {
 public:
  explicit SyntheticText(const LmDataOptions& o) : o_(o) {}
  std::string name() const override { return "synthetic-text"; }
  int64_t vocab_size() const override { return kVocab; }
  double bytes_per_token() const override { return 0; }
  std::string tokenizer_spec() const override { return ""; }
  int64_t train_batches() const override { return 1000; }
  LmBatch train_batch(int64_t index) override { return make(1, static_cast<uint64_t>(index)); }
  int64_t val_batches() const override { return 4; }
  LmBatch val_batch(int64_t index) const override { return make(0, static_cast<uint64_t>(index)); }

 private:
  static constexpr int64_t kVocab = 256;
  LmBatch make(uint64_t stream, uint64_t index) const {
    auto tokens = torch::empty({o_.batch_size, o_.seq_len + 1}, torch::kLong);
    auto* t = tokens.data_ptr<int64_t>();
    for (int64_t row = 0; row < o_.batch_size; ++row) {
      // Each (stream, batch, row of the global batch) has its own generator: order-free,
      // resumable, and the same global batch whatever the number of ranks sharing it.
      const auto global_row = static_cast<uint64_t>(o_.rank * o_.batch_size + row);
      uint64_t s = o_.seed * 0x100000001b3ULL ^ (stream << 48) ^ (index << 20) ^ global_row;
      int64_t x = static_cast<int64_t>(splitmix(s) % kVocab);
      for (int64_t i = 0; i <= o_.seq_len; ++i) {
        t[row * (o_.seq_len + 1) + i] = x;
        x = splitmix(s) % 4 != 0 ? (x * 7 + 3) % kVocab
                                 : static_cast<int64_t>(splitmix(s) % kVocab);
      }
    }
    return {tokens.narrow(1, 0, o_.seq_len).contiguous(),
            tokens.narrow(1, 1, o_.seq_len).contiguous()};
  }
  LmDataOptions o_;
};

// The token files of `gpulab data tokenize` (train/data/token_file.h), cut into windows in the
// resumable order of train/data/token_windows.h.
class TokenFileBatches : public LmBatches {
 public:
  TokenFileBatches(TokenData data, const LmDataOptions& o) : data_(std::move(data)) {
    WindowOptions w;
    w.seq_len = o.seq_len;
    w.batch_size = o.batch_size;
    w.seed = o.seed;
    w.rank = o.rank;
    w.world_size = o.world_size;
    if (auto st = data_.check_seq_len(o.seq_len); !st) throw Exception(st.error());
    train_.emplace(TokenWindows::create(data_.train(), w).value_or_throw());
    val_.emplace(ValWindows::create(data_.val(), w, kMaxValBatches).value_or_throw());
  }
  std::string name() const override { return "text (" + data_.dir().filename().string() + ")"; }
  int64_t vocab_size() const override { return data_.meta().vocab_size; }
  double bytes_per_token() const override { return data_.meta().val_bytes_per_token(); }
  std::string tokenizer_spec() const override { return data_.tokenizer_spec(); }
  int64_t train_batches() const override { return train_->steps_per_epoch(); }
  LmBatch train_batch(int64_t index) override {
    auto b = train_->batch(index);
    return {b.inputs, b.targets};
  }
  int64_t val_batches() const override { return val_->batches(); }
  LmBatch val_batch(int64_t index) const override {
    auto b = val_->batch(index);
    return {b.inputs, b.targets};
  }

 private:
  static constexpr int64_t kMaxValBatches = 16;  // a fixed, quick validation set
  TokenData data_;
  std::optional<TokenWindows> train_;
  std::optional<ValWindows> val_;
};

}  // namespace

bool is_text_dataset(const std::string& dataset) {
  return dataset == "text" || dataset == "synthetic-text";
}

std::unique_ptr<LmBatches> open_lm_batches(const std::string& dataset, const std::string& data_dir,
                                           const LmDataOptions& opts) {
  if (dataset == "synthetic-text") return std::make_unique<SyntheticText>(opts);
  if (dataset == "text")
    return std::make_unique<TokenFileBatches>(TokenData::open(data_dir).value_or_throw(), opts);
  throw Exception(Code::kInvalidArgument,
                  "a language model trains on --dataset text or synthetic-text, not " + dataset,
                  "tokenize a corpus with `gpulab data tokenize` and pass --dataset text");
}

}  // namespace gpulab::train
