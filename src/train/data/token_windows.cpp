// Training and validation window orders over a token file (see token_windows.h).
#include "train/data/token_windows.h"

#include <fmt/format.h>

#include "train/data/sampler.h"
#include "train/data/transforms.h"

namespace gpulab::train {

namespace {

Status check_options(const TokenFile& file, const WindowOptions& o, const char* what) {
  if (o.seq_len <= 0 || o.batch_size <= 0)
    return Error(Code::kInvalidArgument, "--seq_len and --batch_size must be positive");
  if (o.world_size <= 0 || o.rank < 0 || o.rank >= o.world_size)
    return Error(Code::kInvalidArgument,
                 fmt::format("rank {} outside world size {}", o.rank, o.world_size));
  if (file.size() < o.seq_len + 1)
    return Error(Code::kInvalidArgument,
                 fmt::format("the {} split holds {} tokens, fewer than one window of --seq_len {} "
                             "(+1 for the targets)",
                             what, file.size(), o.seq_len),
                 "use a shorter --seq_len or tokenize more text");
  return ok_status();
}

}  // namespace

TokenBatch gather_windows(const TokenFile& file, const std::vector<int64_t>& starts,
                          int64_t seq_len) {
  const auto b = static_cast<int64_t>(starts.size());
  auto window = torch::empty({b, seq_len + 1}, torch::kLong);
  auto* p = window.data_ptr<int64_t>();
  for (int64_t i = 0; i < b; ++i)
    file.read(starts[static_cast<size_t>(i)], seq_len + 1, p + i * (seq_len + 1));
  using torch::indexing::Slice;
  return {window.index({Slice(), Slice(0, seq_len)}).contiguous(),
          window.index({Slice(), Slice(1, seq_len + 1)}).contiguous()};
}

// ---- training order ----

TokenWindows::TokenWindows(const TokenFile& file, WindowOptions opts) : file_(&file), opts_(opts) {}

Result<TokenWindows> TokenWindows::create(const TokenFile& file, WindowOptions opts) {
  if (auto s = check_options(file, opts, "training"); !s) return s.error();
  TokenWindows w(file, opts);
  w.windows_ = (file.size() - 1) / opts.seq_len;
  const int64_t global = opts.batch_size * opts.world_size;
  w.steps_per_epoch_ = w.windows_ / global;
  if (w.steps_per_epoch_ == 0)
    return Error(Code::kInvalidArgument,
                 fmt::format("the training split holds {} windows of --seq_len {}, fewer than "
                             "one global batch ({} per rank x {} ranks = {})",
                             w.windows_, opts.seq_len, opts.batch_size, opts.world_size, global),
                 fmt::format("use a smaller --batch_size or --seq_len, or at least {} tokens",
                             global * opts.seq_len + 1));
  return w;
}

void TokenWindows::load_epoch(int64_t epoch) {
  if (epoch == cached_epoch_) return;
  const uint64_t key = mix64(opts_.seed ^ mix64(static_cast<uint64_t>(epoch) + 0x51ED27ull));
  // Window edges shift by up to (N - 1) % T tokens per epoch, keeping the count the same.
  const int64_t slack = (file_->size() - 1) % opts_.seq_len;
  offset_ = static_cast<int64_t>(mix64(key) % static_cast<uint64_t>(slack + 1));
  perm_ = seeded_permutation(windows_, key);
  cached_epoch_ = epoch;
}

std::vector<int64_t> TokenWindows::window_starts(int64_t step) {
  GPULAB_ASSERT(step >= 0, "negative step");
  load_epoch(epoch_of(step));
  const int64_t k = step % steps_per_epoch_;
  const int64_t b = opts_.batch_size, w = opts_.world_size;
  std::vector<int64_t> starts(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    const int64_t pos = (k * b + i) * w + opts_.rank;
    starts[static_cast<size_t>(i)] = offset_ + perm_[static_cast<size_t>(pos)] * opts_.seq_len;
  }
  return starts;
}

TokenBatch TokenWindows::batch(int64_t step) {
  return gather_windows(*file_, window_starts(step), opts_.seq_len);
}

// ---- validation order ----

Result<ValWindows> ValWindows::create(const TokenFile& file, WindowOptions opts,
                                      int64_t max_batches) {
  if (auto s = check_options(file, opts, "validation"); !s) return s.error();
  ValWindows v;
  v.file_ = &file;
  v.opts_ = opts;
  const int64_t windows = (file.size() - 1) / opts.seq_len;
  v.per_rank_ = windows / opts.world_size;
  if (v.per_rank_ == 0)
    return Error(Code::kInvalidArgument,
                 fmt::format("the validation split holds {} windows of --seq_len {}, fewer than "
                             "one per rank ({} ranks)",
                             windows, opts.seq_len, opts.world_size),
                 "use a larger --val_fraction when tokenizing, or a shorter --seq_len");
  v.batches_ = (v.per_rank_ + opts.batch_size - 1) / opts.batch_size;
  if (max_batches >= 0 && max_batches < v.batches_) {
    v.batches_ = max_batches;
    v.per_rank_ = std::min(v.per_rank_, max_batches * opts.batch_size);
  }
  return v;
}

TokenBatch ValWindows::batch(int64_t i) const {
  GPULAB_ASSERT(i >= 0 && i < batches_, "validation batch out of range");
  const int64_t first = i * opts_.batch_size;
  const int64_t count = std::min(opts_.batch_size, per_rank_ - first);
  std::vector<int64_t> starts(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j)
    starts[static_cast<size_t>(j)] = ((first + j) * opts_.world_size + opts_.rank) * opts_.seq_len;
  return gather_windows(*file_, starts, opts_.seq_len);
}

}  // namespace gpulab::train
