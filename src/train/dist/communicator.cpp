// Communicator: TCPStore rendezvous, Gloo/NCCL backend creation, and error translation.
#include "train/dist/communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "core/error.h"
#include "launch/heartbeat.h"
#include "launch/peer_table.h"
#include "launch/ports.h"

#if GPULAB_DIST_NCCL
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace gpulab::train::dist {

namespace {

// c10::Error's what() carries a C++ backtrace; users get the one-line reason.
std::string reason_of(const std::exception& e) {
  if (auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

// Every rank's host and address, filled at rendezvous so that a failure names the lost peer.
// One communicator per process: the table is the process's.
launch::PeerTable g_peers;

std::string seconds_text(std::chrono::milliseconds ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

using BackendMaker = std::function<BackendPtr(c10::intrusive_ptr<::c10d::Store>, int, int)>;

// How this process makes a backend over a store: the world's and every subgroup's alike (same
// interface, same timeout). Picks this rank's device into `device` (and selects it for NCCL).
BackendMaker backend_maker(const std::string& backend, const launch::RankPlace& place,
                           std::chrono::milliseconds timeout, torch::Device& device) {
  if (backend == "gloo") {
#if GPULAB_DIST_GLOO
    auto o = ::c10d::ProcessGroupGloo::Options::create(timeout);
    // Bind where peers can reach us: a named interface (torch's variable), else the address
    // on the route to the master (several hosts), else loopback.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
      o->devices.push_back(::c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    } else {
      auto local = launch::local_address_towards(place.master_addr);
      o->devices.push_back(
          ::c10d::ProcessGroupGloo::createDeviceForHostname(local.ok() ? *local : "127.0.0.1"));
    }
    o->threads = 2;
    return [o](c10::intrusive_ptr<::c10d::Store> store, int rank, int size) -> BackendPtr {
      return c10::make_intrusive<::c10d::ProcessGroupGloo>(store, rank, size, o);
    };
#endif
  } else {
#if GPULAB_DIST_NCCL
    // gpulab's sbatch scripts show every rank all of its node's GPUs (local rank i takes GPU
    // i); a script with --gpus-per-task=1 leaves each rank one: index 0, not its local rank.
    const int visible = std::max<int>(1, static_cast<int>(torch::cuda::device_count()));
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(place.local_rank % visible));
    c10::cuda::set_device(device.index());
    return [timeout](c10::intrusive_ptr<::c10d::Store> store, int rank, int size) -> BackendPtr {
      auto o = ::c10d::ProcessGroupNCCL::Options::create();
      o->timeout = timeout;
      return c10::make_intrusive<::c10d::ProcessGroupNCCL>(store, rank, size, o);
    };
#endif
  }
  return [](auto, int, int) -> BackendPtr { return nullptr; };
}

}  // namespace

bool nccl_compiled() {
  return GPULAB_DIST_NCCL != 0;
}

std::string resolve_backend(const std::string& requested) {
  const bool gpu = torch::cuda::is_available();
  if (requested == "auto" && gpu && nccl_compiled()) return "nccl";
  if (requested == "gloo" || requested == "auto") {
    if (!GPULAB_DIST_GLOO)
      throw Exception(Code::kUnsupported,
                      "this build has no Gloo backend (CPU ranks): the libtorch it was built "
                      "against ships no gloo/ headers, as PyTorch wheels do",
                      gpu ? "use --backend nccl"
                          : "build against Debian's libtorch-dev with libgloo-dev for CPU ranks");
    return "gloo";
  }
  if (requested == "nccl") {
    if (!nccl_compiled())
      throw Exception(Code::kUnsupported, "this libtorch has no NCCL/RCCL backend",
                      "use --backend gloo, or build against a CUDA or ROCm libtorch");
    if (!gpu) throw Exception(Code::kUnsupported, "--backend nccl needs a GPU; none is visible");
    return requested;
  }
  throw Exception(Code::kInvalidArgument, "unknown backend '" + requested + "'",
                  "use auto, nccl or gloo");
}

Communicator::Communicator(const launch::RankPlace& place, const CommOptions& opts)
    : rank_(place.rank), world_rank_(place.rank), size_(place.world_size), timeout_(opts.timeout) {
  backend_ = resolve_backend(opts.backend);
  if (opts.backend == "auto" && opts.print_auto && rank_ == 0) {
    std::printf("Auto-detected backend: %s\n", backend_.c_str());
    std::fflush(stdout);
  }
  ::c10d::TCPStoreOptions so;
  so.port = static_cast<std::uint16_t>(place.master_port);
  so.isServer = rank_ == 0;
  so.numWorkers = static_cast<std::size_t>(size_);
  so.waitWorkers = true;
  so.timeout = timeout_;
  const std::string where = place.master_addr + ":" + std::to_string(place.master_port);
  try {
    store_ = c10::make_intrusive<::c10d::TCPStore>(place.master_addr, so);
  } catch (const std::exception& e) {
    fail("rendezvous at " + where, reason_of(e));
  }
  try {
    make_backend_ = backend_maker(backend_, place, timeout_, device_);
    pg_ = make_backend_(store_, rank_, size_);
  } catch (const std::exception& e) {
    fail("connecting the " + backend_ + " process group via " + where, reason_of(e));
  }
  GPULAB_ASSERT(pg_, "no process group was created");
  // One small key per rank (skipped for very large jobs, where the lookups would cost more
  // than a failure message is worth).
  if (size_ <= 1024) {
    auto addr = launch::local_address_towards(place.master_addr);
    const std::string mine =
        launch::PeerTable::record(launch::this_host_name(), addr.ok() ? *addr : "?");
    try {
      store_->set("gpulab/peer/" + std::to_string(rank_),
                  std::vector<uint8_t>(mine.begin(), mine.end()));
      for (int r = 0; r < size_; ++r) {
        auto v = store_->get("gpulab/peer/" + std::to_string(r));
        g_peers.set(r, std::string(v.begin(), v.end()));
      }
    } catch (const std::exception& e) {
      fail("exchanging host names", reason_of(e));
    }
  }
}

Communicator::Communicator(const Communicator& world, const std::vector<int>& ranks,
                           const std::string& name)
    : world_rank_(world.world_rank_),
      size_(static_cast<int>(ranks.size())),
      backend_(world.backend_),
      device_(world.device_),
      timeout_(world.timeout_),
      make_backend_(world.make_backend_) {
  auto me = std::find(ranks.begin(), ranks.end(), world.rank_);
  GPULAB_ASSERT(me != ranks.end(), ("a rank made a group it is not in: " + name).c_str());
  rank_ = static_cast<int>(me - ranks.begin());
  // The group's own keys under the world's store: groups never see each other's rendezvous.
  store_ = c10::make_intrusive<::c10d::PrefixStore>("gpulab/group/" + name, world.store_);
  try {
    pg_ = make_backend_(store_, rank_, size_);
  } catch (const std::exception& e) {
    fail("connecting the " + backend_ + " process group '" + name + "'", reason_of(e));
  }
  GPULAB_ASSERT(pg_, "no process group was created");
}

// NCCL's backend left to its destructor warns at exit ("destroy_process_group() was not called")
// and can wait there on its communicators: shut down as torch.distributed.destroy_process_group
// does after a normal run, aborted after a failure or while an error unwinds (a peer may be gone,
// and a shutdown would wait for it). Gloo needs neither.
Communicator::~Communicator() {
  if (!pg_ || backend_ != "nccl") return;
  try {
    if (failed_ || std::uncaught_exceptions() > 0)
      pg_->abort();
    else
      pg_->shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "warning: closing the NCCL process group: %s\n", reason_of(e).c_str());
  }
}

void Communicator::fail(const std::string& what, const std::string& detail) {
  failed_ = true;
  const bool timed_out =
      detail.find("imed out") != std::string::npos || detail.find("imeout") != std::string::npos;
  std::string msg;
  const std::string host = launch::this_host_name();
  const std::string me = std::to_string(world_rank_) + (host.empty() ? "" : " (" + host + ")");
  if (timed_out) {
    msg = "collective timeout: " + what + " on rank " + me + " did not complete within " +
          seconds_text(timeout_) + " (" + detail + ")" + g_peers.explain(detail, world_rank_);
  } else {
    msg = what + " failed on rank " + me + ": " + detail + g_peers.explain(detail, world_rank_);
  }
  launch::report_rank_error(msg);
  throw Exception(timed_out ? Code::kTimeout : Code::kUnavailable, msg,
                  timed_out
                      ? "a peer rank is stuck or gone; raise --dist_timeout if it is only slow"
                      : "another rank has probably died; see its output");
}

namespace {

int64_t wire_bytes(const torch::Tensor& t) {
  return t.numel() * static_cast<int64_t>(t.element_size());
}

}  // namespace

void Communicator::count(CommKind kind, int64_t payload, int64_t sent) {
  counters_.add(kind, payload, sent);
  process_comm_counters().add(kind, payload, sent);
}

// Gloo: its ring, segment by segment (gloo_allreduce_sent). NCCL: a ring's 2 (p - 1) / p of the
// buffer (its tree algorithm, picked for some sizes and node counts, sends about as much).
int64_t Communicator::allreduce_sent(const torch::Tensor& t) const {
  if (backend_ == "gloo")
    return gloo_allreduce_sent(wire_bytes(t), static_cast<int64_t>(t.element_size()), rank_, size_);
  return 2 * wire_bytes(t) * (size_ - 1) / size_;
}

WorkPtr Communicator::allreduce_async(torch::Tensor& t, const std::string& what) {
  count(CommKind::kAllReduce, wire_bytes(t), allreduce_sent(t));
  std::vector<at::Tensor> v{t};
  try {
    return pg_->allreduce(v, sum_options());
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
}

namespace {

// Gloo moves bytes for all-gather, send and recv whatever the dtype, but its type switch in
// libtorch 1.13 lists neither bfloat16 nor int16: bf16 travels as fp16 (same size, bits
// unchanged; nothing is added).
at::Tensor gloo_wire(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t;
}

// Several point-to-point operations that finish as one: wait() waits for each in turn.
class AllWork : public ::c10d::Work {
 public:
  explicit AllWork(std::vector<WorkPtr> works) : works_(std::move(works)) {}
  bool isCompleted() override {
    return std::all_of(works_.begin(), works_.end(), [](auto& w) { return w->isCompleted(); });
  }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : works_) w->wait(timeout);
    return true;
  }

 private:
  std::vector<WorkPtr> works_;
};

}  // namespace

WorkPtr Communicator::allgather_async(torch::Tensor& out, torch::Tensor& in,
                                      const std::string& what) {
  // Either way this rank's part goes to each peer once: NCCL's ring forwards p - 1 parts of
  // that size, Gloo's point-to-point sends below do the same directly.
  count(CommKind::kAllGather, wire_bytes(in), wire_bytes(in) * (size_ - 1));
  try {
    if (backend_ == "nccl") return pg_->_allgather_base(out, in);
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
  // Gloo in libtorch 1.13 has no _allgather_base, and its list form stages everything: it
  // concatenates the inputs, gathers into a new flat tensor of the full size and copies that
  // out again (one full-size allocation and about two full-size copies per call). Point to
  // point instead: each peer's shard is received straight into its slot of `out`, this rank's
  // is sent from where it lies and copied into its own slot once.
  const int64_t n = in.numel();
  const uint32_t tag = next_tag();
  std::vector<WorkPtr> works;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto slot = out.narrow(0, r * n, n);
    works.push_back(post_recv(slot, r, tag, what));
    works.push_back(post_send(in, r, tag, what));
  }
  out.narrow(0, rank_ * n, n).copy_(in);
  return c10::make_intrusive<AllWork>(std::move(works));
}

WorkPtr Communicator::reduce_scatter_async(torch::Tensor& out, torch::Tensor& in,
                                           const std::string& what) {
  ::c10d::ReduceScatterOptions o;
  o.reduceOp = ::c10d::ReduceOp(::c10d::ReduceOp::SUM);
  count(CommKind::kReduceScatter, wire_bytes(in),
        wire_bytes(in) * (size_ - 1) / size_);  // a ring's
  try {
    return pg_->_reduce_scatter_base(out, in, o);
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
}

WorkPtr Communicator::send_async(torch::Tensor& t, int to, uint32_t tag, const std::string& what) {
  count(CommKind::kSend, wire_bytes(t), wire_bytes(t));
  return post_send(t, to, tag, what);
}

WorkPtr Communicator::recv_async(torch::Tensor& t, int from, uint32_t tag,
                                 const std::string& what) {
  count(CommKind::kRecv, wire_bytes(t), 0);
  return post_recv(t, from, tag, what);
}

WorkPtr Communicator::post_send(torch::Tensor& t, int to, uint32_t tag, const std::string& what) {
  std::vector<at::Tensor> v{backend_ == "nccl" ? t : gloo_wire(t)};
  try {
    return pg_->send(v, to, static_cast<int>(tag));
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
}

WorkPtr Communicator::post_recv(torch::Tensor& t, int from, uint32_t tag, const std::string& what) {
  std::vector<at::Tensor> v{backend_ == "nccl" ? t : gloo_wire(t)};
  try {
    return pg_->recv(v, from, static_cast<int>(tag));
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
}

void Communicator::wait(const WorkPtr& work, const std::string& what) {
  launch::heartbeat_if_armed("waiting in " + what);
  try {
    work->wait();
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
}

void Communicator::allreduce(torch::Tensor& t, ::c10d::ReduceOp::RedOpType op,
                             const std::string& what) {
  torch::Tensor staged =
      t.device() == device_ && t.is_contiguous() ? t : t.to(device_).contiguous();
  std::vector<at::Tensor> v{staged};
  ::c10d::AllreduceOptions o;
  o.reduceOp = ::c10d::ReduceOp(op);
  count(CommKind::kAllReduce, wire_bytes(staged), allreduce_sent(staged));
  WorkPtr work;
  try {
    work = pg_->allreduce(v, o);
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
  wait(work, what);
  if (!staged.is_same(t)) t.copy_(staged);
}

void Communicator::allreduce_sum(torch::Tensor& t, const std::string& what) {
  allreduce(t, ::c10d::ReduceOp::SUM, what);
}

void Communicator::allreduce_max(torch::Tensor& t, const std::string& what) {
  allreduce(t, ::c10d::ReduceOp::MAX, what);
}

bool Communicator::any_rank(bool mine, const std::string& what) {
  auto flag = torch::tensor({mine ? 1.0F : 0.0F}).to(device_);
  allreduce_max(flag, what);
  return flag.cpu().item<float>() > 0;
}

void Communicator::broadcast(torch::Tensor& t, int root, const std::string& what) {
  torch::Tensor staged =
      t.device() == device_ && t.is_contiguous() ? t : t.to(device_).contiguous();
  std::vector<at::Tensor> v{staged};
  ::c10d::BroadcastOptions o;
  o.rootRank = root;
  count(CommKind::kBroadcast, wire_bytes(staged),
        tree_broadcast_sent(wire_bytes(staged), rank_, root, size_));
  try {
    wait(pg_->broadcast(v, o), what);
  } catch (const Exception&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
  if (!staged.is_same(t)) t.copy_(staged);
}

void Communicator::barrier(const std::string& what) {
  try {
    wait(pg_->barrier(), what);
  } catch (const Exception&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, reason_of(e));
  }
}

}  // namespace gpulab::train::dist
