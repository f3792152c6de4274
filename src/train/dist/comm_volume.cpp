// CommVolume and its counters, and the bytes the backends' algorithms send per operation.
#include "train/dist/comm_volume.h"

#include <algorithm>

#include "core/int_math.h"

namespace gpulab::train::dist {

const char* comm_kind_name(CommKind k) {
  static constexpr const char* names[kCommKinds] = {"all_reduce", "all_gather", "reduce_scatter",
                                                    "broadcast",  "send",       "recv"};
  return names[static_cast<int>(k)];
}

int64_t CommVolume::total_sent() const {
  int64_t n = 0;
  for (int64_t s : sent) n += s;
  return n;
}

CommVolume CommVolume::operator-(const CommVolume& earlier) const {
  CommVolume d;
  for (size_t i = 0; i < kCommKinds; ++i) {
    d.calls[i] = calls[i] - earlier.calls[i];
    d.payload[i] = payload[i] - earlier.payload[i];
    d.sent[i] = sent[i] - earlier.sent[i];
  }
  return d;
}

Json CommVolume::to_json(double per) const {
  Json kinds = Json::object();
  for (size_t i = 0; i < kCommKinds; ++i) {
    if (calls[i] == 0) continue;
    kinds[comm_kind_name(static_cast<CommKind>(i))] = {
        {"calls", static_cast<double>(calls[i]) / per},
        {"payload_bytes", static_cast<double>(payload[i]) / per},
        {"sent_bytes", static_cast<double>(sent[i]) / per}};
  }
  return {{"sent_bytes", static_cast<double>(total_sent()) / per}, {"by_kind", kinds}};
}

void CommCounters::add(CommKind k, int64_t payload, int64_t sent) {
  const auto i = static_cast<size_t>(k);
  calls_[i].fetch_add(1, std::memory_order_relaxed);
  payload_[i].fetch_add(payload, std::memory_order_relaxed);
  sent_[i].fetch_add(sent, std::memory_order_relaxed);
}

CommVolume CommCounters::snapshot() const {
  CommVolume v;
  for (size_t i = 0; i < kCommKinds; ++i) {
    v.calls[i] = calls_[i].load(std::memory_order_relaxed);
    v.payload[i] = payload_[i].load(std::memory_order_relaxed);
    v.sent[i] = sent_[i].load(std::memory_order_relaxed);
  }
  return v;
}

CommCounters& process_comm_counters() {
  static CommCounters counters;
  return counters;
}

int64_t gloo_allreduce_sent(int64_t bytes, int64_t element_size, int rank, int size) {
  if (size <= 1 || bytes <= 0) return 0;
  const int64_t p = size;
  // gloo::AllreduceOptions::kMaxSegmentSize, rounded down to whole elements.
  const int64_t max_segment = element_size * ((int64_t{1} << 20) / element_size);
  const int64_t segment = round_up(std::min(ceil_div(bytes, 2 * p), max_segment), element_size);
  const int64_t segments = round_up(std::max(ceil_div(bytes, segment), 2 * p), p);
  const int64_t per_rank = segments / p;
  auto chunk = [&](int64_t c) {
    int64_t n = 0;
    for (int64_t s = c * per_rank; s < (c + 1) * per_rank; ++s)
      n += std::clamp(bytes - s * segment, int64_t{0}, segment);
    return n;
  };
  return 2 * bytes - chunk(rank) - chunk((rank + p - 1) % p);
}

int64_t tree_broadcast_sent(int64_t bytes, int rank, int root, int size) {
  const int relative = (rank - root + size) % size;
  int children = 0;
  // Relative rank r receives at the mask of its lowest set bit and sends at every lower one.
  for (int mask = 1; mask < size; mask <<= 1) {
    if (relative & mask) break;
    if (relative + mask < size) ++children;
  }
  return bytes * children;
}

}  // namespace gpulab::train::dist
