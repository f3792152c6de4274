// All-gather and reduce-scatter of flat groups (Gloo: reduce-scatter as a pairwise exchange).
#include "train/dist/shard_collectives.h"

namespace gpulab::train::dist {

PendingGather start_gather(Communicator& comm, FlatGroup& g, const std::string& what,
                           BufferPool* pool) {
  PendingGather p;
  g.allocate(pool);
  // Mixed precision: the compute copies are gathered from the master shards rounded once.
  p.input = g.shard().detach().to(g.compute_dtype());
  if (comm.size() == 1) {
    g.full().copy_(p.input);
    return p;
  }
  p.work = comm.allgather_async(g.full(), p.input, what);
  return p;
}

void finish_gather(Communicator& comm, FlatGroup& g, PendingGather& p, const std::string& what) {
  if (p.work) comm.wait(p.work, what);
  p = {};
  g.mark_gathered();
}

PendingReduce start_reduce_scatter(Communicator& comm, FlatGroup& g, torch::Tensor flat_grad,
                                   const std::string& what) {
  PendingReduce p;
  p.flat = std::move(flat_grad);
  if (comm.size() == 1) return p;
  if (comm.has_reduce_scatter()) {
    p.out = torch::empty({g.shard_numel()}, p.flat.options());
    p.works.push_back(comm.reduce_scatter_async(p.out, p.flat, what));
    return p;
  }
  const int64_t n = g.shard_numel();
  const uint32_t tag = comm.next_tag();
  p.incoming.resize(static_cast<size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    if (r == comm.rank()) continue;
    auto& in = p.incoming[static_cast<size_t>(r)];
    in = torch::empty({n}, p.flat.options());
    p.works.push_back(comm.recv_async(in, r, tag, what));
    auto slice = p.flat.narrow(0, n * r, n);
    p.works.push_back(comm.send_async(slice, r, tag, what));
  }
  return p;
}

void finish_reduce_scatter(Communicator& comm, FlatGroup& g, PendingReduce& p,
                           const std::string& what) {
  for (const auto& w : p.works) comm.wait(w, what);
  torch::Tensor mine;
  if (p.out.defined()) {
    mine = p.out;
  } else if (p.incoming.empty()) {
    mine = p.flat.narrow(0, 0, g.shard_numel()).clone();  // one rank: the whole gradient
  } else {
    const int64_t n = g.shard_numel();
    auto part = [&](int r) {
      return r == comm.rank() ? p.flat.narrow(0, n * r, n) : p.incoming[static_cast<size_t>(r)];
    };
    // Summed in the master dtype (a bf16 reduce moves half the bytes but adds in fp32), the
    // first two parts in one pass.
    const auto master = g.master_dtype();
    mine = part(0).scalar_type() == master ? torch::add(part(0), part(1))
                                           : part(0).to(master).add_(part(1));
    for (int r = 2; r < comm.size(); ++r) mine.add_(part(r));
  }
  auto& grad = g.shard().mutable_grad();
  grad = mine.to(g.master_dtype());
  // The mean: divided here, on 1/N of the gradient, rather than the whole flat gradient before
  // sending (one pass over the model's gradient less per step; fp32 and bf16 share a range).
  if (comm.size() > 1) grad.div_(comm.size());
  p = {};
}

}  // namespace gpulab::train::dist
