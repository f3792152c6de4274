// Communication volume: how many bytes each kind of collective and point-to-point operation has
// moved from this rank, counted by the Communicator as it starts each operation (always on: a
// few relaxed atomic adds per call), per communicator and for the whole process.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "core/json.h"

namespace gpulab::train::dist {

enum class CommKind : int { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kSend, kRecv };
constexpr int kCommKinds = 6;
const char* comm_kind_name(CommKind k);  // "all_reduce", "all_gather", ...

// A snapshot. `payload`: the bytes of the tensor this rank handed in (an all-gather's own part;
// a receive's buffer). `sent`: what the backend's algorithm sends from this rank for it (the
// functions below); a receive sends nothing.
struct CommVolume {
  std::array<int64_t, kCommKinds> calls{}, payload{}, sent{};

  int64_t total_sent() const;
  int64_t sent_of(CommKind k) const { return sent[static_cast<size_t>(k)]; }
  CommVolume operator-(const CommVolume& earlier) const;
  // {"sent_bytes": N, "by_kind": {"all_reduce": {"calls", "payload_bytes", "sent_bytes"}, ...}}
  // (kinds with no call left out), each figure divided by `per` (e.g. steps).
  Json to_json(double per = 1.0) const;
};

class CommCounters {
 public:
  void add(CommKind k, int64_t payload, int64_t sent);
  CommVolume snapshot() const;

 private:
  std::array<std::atomic<int64_t>, kCommKinds> calls_{}, payload_{}, sent_{};
};

// Every communicator of this process together (the world and its subgroups).
CommCounters& process_comm_counters();

// Bytes Gloo's ring all-reduce (gloo/allreduce.cc) sends from `rank` of `size` for a buffer of
// `bytes` bytes of `element_size`-byte elements. The buffer is cut into size * k segments of
// equal length (rounded up to whole elements, at least two per rank, at most 1 MiB each: the
// last ones may be short or empty), chunk c being segments c k .. c k + k - 1. Reduce-scatter:
// rank r sends every chunk except its own (r); all-gather: every chunk except r - 1's. So it
// sends 2 bytes - chunk(r) - chunk(r - 1): 2 (p - 1) / p of the buffer when the chunks are equal,
// and exactly `bytes` for two ranks whatever the rounding.
int64_t gloo_allreduce_sent(int64_t bytes, int64_t element_size, int rank, int size);
// A binomial tree from `root` (Gloo's and NCCL's broadcast for small groups): each rank sends
// the whole buffer once per child it has.
int64_t tree_broadcast_sent(int64_t bytes, int rank, int root, int size);

}  // namespace gpulab::train::dist
