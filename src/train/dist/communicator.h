// A process group for DDP: rendezvous through a TCPStore, then Gloo (CPU) or NCCL/RCCL (GPU)
// collectives. Failures (a timed-out or broken collective) become one gpulab::Exception naming
// the operation and the rank, which the rank also leaves for the launcher's report.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launch/rank_env.h"
#include "train/dist/comm_volume.h"
#include "train/dist/compat.h"

namespace gpulab::train::dist {

struct CommOptions {
  std::string backend = "auto";  // auto | gloo | nccl
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  bool print_auto = true;  // rank 0 prints "Auto-detected backend: gloo", as the seed does
};

class Communicator {
 public:
  // Rendezvous and backend creation; throws gpulab::Exception (timeout, unsupported backend).
  Communicator(const launch::RankPlace& place, const CommOptions& opts);
  // A subgroup of `world` (a device mesh's tensor-, pipeline- or data-parallel ranks): `ranks`
  // lists world ranks in group order and holds world.rank(); `name` keys its rendezvous and must
  // be the same on every member and unique per group. Only the members call it, together.
  Communicator(const Communicator& world, const std::vector<int>& ranks, const std::string& name);
  ~Communicator();

  int rank() const { return rank_; }  // within this group (the world's rank for the world)
  int size() const { return size_; }
  const std::string& backend() const { return backend_; }
  // The device collectives run on (CPU for Gloo, this rank's GPU for NCCL).
  const torch::Device& device() const { return device_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Starts a sum all-reduce of `t` in place; `t` must live on device(). Finish it with wait().
  WorkPtr allreduce_async(torch::Tensor& t, const std::string& what);
  // Sharded data parallel. Starts gathering every rank's `in` into `out` (size() * in.numel()
  // elements, in rank order); both on device() and contiguous. NCCL gathers straight into `out`;
  // Gloo (no _allgather_base in libtorch 1.13) into views of it.
  WorkPtr allgather_async(torch::Tensor& out, torch::Tensor& in, const std::string& what);
  // Starts out = the sum over ranks of rank()'s slice of `in` (NCCL only: Gloo in libtorch
  // 1.13 answers "does not support reduce_scatter"; train/dist/shard_collectives.h covers it).
  bool has_reduce_scatter() const { return backend_ == "nccl"; }
  WorkPtr reduce_scatter_async(torch::Tensor& out, torch::Tensor& in, const std::string& what);
  // Point to point (Gloo's way to a reduce-scatter): `t` contiguous on device(). Every rank
  // must start its operations of one exchange with the same tag (next_tag() in step).
  WorkPtr send_async(torch::Tensor& t, int to, uint32_t tag, const std::string& what);
  WorkPtr recv_async(torch::Tensor& t, int from, uint32_t tag, const std::string& what);
  uint32_t next_tag() { return next_tag_++; }
  // Waits for a started collective; on failure throws (and reports) naming `what`.
  void wait(const WorkPtr& work, const std::string& what);

  // Blocking helpers; tensors on another device are staged through device() and copied back.
  void allreduce_sum(torch::Tensor& t, const std::string& what = "allreduce");
  void allreduce_max(torch::Tensor& t, const std::string& what = "allreduce max");
  // Whether `mine` is true on any rank of the group (a 4-byte max all-reduce).
  bool any_rank(bool mine, const std::string& what);
  void broadcast(torch::Tensor& t, int root, const std::string& what = "broadcast");
  void barrier(const std::string& what = "barrier");

  // Bytes this communicator's operations have moved from this rank, by kind (comm_volume.h;
  // process_comm_counters() sums every communicator of the process).
  CommVolume volume() const { return counters_.snapshot(); }

  // Turns any collective failure into the run-ending error (used by wait and the helpers).
  [[noreturn]] void fail(const std::string& what, const std::string& detail);

 private:
  void allreduce(torch::Tensor& t, ::c10d::ReduceOp::RedOpType op, const std::string& what);
  // Point to point without counting (all-gather over Gloo counts its sends as an all-gather).
  WorkPtr post_send(torch::Tensor& t, int to, uint32_t tag, const std::string& what);
  WorkPtr post_recv(torch::Tensor& t, int from, uint32_t tag, const std::string& what);
  // What the backend sends from this rank for an all-reduce of `t` (comm_volume.h).
  int64_t allreduce_sent(const torch::Tensor& t) const;
  void count(CommKind kind, int64_t payload, int64_t sent);

  int rank_ = 0;
  int world_rank_ = 0;  // what failures name (a subgroup's rank_ is its own)
  int size_ = 1;
  std::string backend_;
  torch::Device device_ = torch::kCPU;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<::c10d::Store> store_;
  BackendPtr pg_;
  // Creates a backend of this kind (Gloo bound to the same interface, or NCCL) over a store;
  // subgroups reuse the world's.
  std::function<BackendPtr(c10::intrusive_ptr<::c10d::Store>, int, int)> make_backend_;
  uint32_t next_tag_ = 0;
  bool failed_ = false;  // a collective failed: the destructor aborts NCCL, not shuts it down
  CommCounters counters_;
};

// "gloo" or "nccl" for `requested` ("auto" picks NCCL when a GPU and NCCL are present);
// throws kUnsupported for a backend this build or host cannot run.
std::string resolve_backend(const std::string& requested);
bool nccl_compiled();

}  // namespace gpulab::train::dist
