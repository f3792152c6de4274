// Positions, masks and row operations of the KV cache (see kv_cache.h).
#include "train/models/kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace gpulab::train {

torch::Tensor begin_step(KvCache& cache, int64_t batch, int64_t t, torch::Device device) {
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  cache.attend = torch::Tensor();
  if (!cache.present.defined()) return torch::arange(cache.length, cache.length + t, longs);
  const int64_t s = cache.length + t;
  auto& present = cache.present;
  GPULAB_ASSERT(present.size(0) == batch && present.size(1) <= s,
                "KvCache::present must be rows x (a prefix of) the positions");
  present = present.to(device);
  if (present.size(1) < s)
    present =
        torch::cat({present, torch::ones({batch, s - present.size(1)}, present.options())}, 1);
  // A row's k-th real token is at position k, wherever padding put its column.
  auto positions = (present.cumsum(1) - 1).clamp_min(0).narrow(1, cache.length, t);
  const auto cols = torch::arange(s, longs);
  const auto query_cols = torch::arange(cache.length, s, longs).unsqueeze(1);
  // A padding query sees itself alone: a row of the mask with nothing allowed would make NaN,
  // and NaN in a padding position's value would reach real rows through 0 * NaN.
  const auto seen = present.unsqueeze(1).logical_or(cols.eq(query_cols).unsqueeze(0));
  cache.attend = seen.logical_and(cols.le(query_cols).unsqueeze(0)).unsqueeze(1);
  return positions;
}

namespace {

// Whether `held` is positions 0..L of a buffer new_buffer made, with room for `extra` more behind
// them in every (row, head). Anything else (a compact copy, a view that starts later in its rows)
// is not: writing past its end could reach another head's positions.
bool has_room(const torch::Tensor& held, int64_t extra) {
  if (held.dim() != 4 || held.storage_offset() != 0 || held.stride(3) != 1 ||
      held.stride(2) != held.size(3))
    return false;
  const int64_t need = (held.size(2) + extra) * held.stride(2);
  if (held.stride(1) < need || held.stride(0) != held.size(1) * held.stride(1)) return false;
  return held.size(0) * held.stride(0) <=
         static_cast<int64_t>(held.storage().nbytes()) / held.element_size();
}

// A buffer for `rows` rows of `like`'s heads with room for `room` positions (at least `length`):
// the view of its first `length` positions, which the caller fills.
torch::Tensor new_buffer(const torch::Tensor& like, int64_t rows, int64_t length, int64_t room) {
  return torch::empty({rows, like.size(1), std::max(length, room), like.size(3)}, like.options())
      .narrow(2, 0, length);
}

// Every layer's keys and values replaced by fn(old).
template <typename Fn>
void each_layer(KvCache& cache, Fn&& fn) {
  for (auto* layers : {&cache.keys, &cache.values})
    for (auto& t : *layers)
      if (t.defined()) t = fn(t);
}

}  // namespace

torch::Tensor append_positions(const torch::Tensor& held, const torch::Tensor& fresh,
                               int64_t reserve) {
  if (!held.defined()) {
    if (reserve <= fresh.size(2) || torch::GradMode::is_enabled()) return fresh;
    return append_positions(new_buffer(fresh, fresh.size(0), 0, reserve), fresh, reserve);
  }
  const auto step = fresh.to(held.scalar_type());
  const int64_t l = held.size(2), t = fresh.size(2);
  if (reserve <= 0 || torch::GradMode::is_enabled()) return torch::cat({held, step}, 2);
  if (!has_room(held, t)) {
    // A reserve too short grows by a quarter at a time, not a position a step.
    auto moved = new_buffer(held, held.size(0), l, std::max(reserve, l + t + (l + t) / 4));
    moved.copy_(held);
    return append_positions(moved, step, reserve);
  }
  auto grown = held.as_strided({held.size(0), held.size(1), l + t, held.size(3)}, held.strides(),
                               held.storage_offset());
  grown.narrow(2, l, t).copy_(step);
  return grown;
}

// Row operations copy once, into a buffer with the cache's reserve, so the next step writes in
// place instead of copying the cache again.
void repeat_rows(KvCache& cache, int64_t times) {
  if (times == 1) return;
  each_layer(cache, [&](const torch::Tensor& t) {
    auto out = new_buffer(t, t.size(0) * times, t.size(2), cache.reserve);
    out.unflatten(0, {t.size(0), times}).copy_(t.unsqueeze(1).expand({-1, times, -1, -1, -1}));
    return out;
  });
  if (cache.present.defined()) cache.present = cache.present.repeat_interleave(times, 0);
}

void keep_rows(KvCache& cache, const torch::Tensor& rows) {
  const auto device = !cache.keys.empty() && cache.keys.front().defined()
                          ? cache.keys.front().device()
                          : rows.device();
  const auto index = rows.to(device);  // one copy to the device, not one per layer
  int64_t first = 0;
  if (cache.present.defined()) {
    cache.present = cache.present.index_select(0, index);
    // The first position some kept row holds: the columns before it are padding in every row.
    first = cache.present.any(0).to(torch::kInt).argmax().item<int64_t>();
    cache.present = cache.present.narrow(1, first, cache.present.size(1) - first);
    cache.length -= first;
  }
  // The kept rows' positions from `first` on, gathered straight into the new buffer (the out=
  // form records no gradient: the cache is generation state, never differentiated).
  torch::NoGradGuard no_grad;
  each_layer(cache, [&](const torch::Tensor& t) {
    const auto kept = t.narrow(2, first, t.size(2) - first);
    auto out = new_buffer(t, index.size(0), kept.size(2), cache.reserve);
    at::index_select_out(out, kept, 0, index);
    return out;
  });
  // Whole rows again: positions are columns, and attention needs no mask.
  if (cache.present.defined() && cache.present.all().item<bool>()) cache.present = torch::Tensor();
}

}  // namespace gpulab::train
