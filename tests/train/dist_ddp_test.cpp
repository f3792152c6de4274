// DDP components with real ranks (Gloo over loopback, started by the real launcher): parameter
// broadcast, bucketed gradient mean with overlap, no_sync accumulation, fp16 compression,
// SyncBatchNorm against one process on the global batch, and a collective timeout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "dist_worker.h"
#include "launch/rank_env.h"
#include "train/dist/ddp_context.h"
#include "train/models/batch_norm.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::testing;
namespace fs = std::filesystem;

namespace {

// Conv + BatchNorm + two Linear layers: enough parameters for several small buckets.
struct NetImpl : torch::nn::Module {
  NetImpl() {
    conv = register_module(
        "conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 8, 3).padding(1).bias(false)));
    bn = register_module("bn", train::BatchNorm2d(8));
    fc1 = register_module("fc1", torch::nn::Linear(8 * 8 * 8, 64));
    fc2 = register_module("fc2", torch::nn::Linear(64, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(bn(conv(x)));
    return fc2(torch::relu(fc1(x.flatten(1))));
  }
  torch::nn::Conv2d conv{nullptr};
  train::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Net);

std::pair<torch::Tensor, torch::Tensor> ddp_batch(int64_t seed, int64_t n) {
  auto g = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  auto x = at::randn({n, 3, 8, 8}, g);
  auto y = at::randint(0, 10, {n}, g);
  return {x, y};
}

std::vector<torch::Tensor> grads_of(Net& net) {
  std::vector<torch::Tensor> g;
  for (auto& p : net->parameters()) g.push_back(p.grad().clone());
  return g;
}

torch::Tensor loss_of(Net& net, const std::pair<torch::Tensor, torch::Tensor>& b) {
  return torch::nn::functional::cross_entropy(net(b.first), b.second);
}

std::unique_ptr<dist::DdpContext> make_context(bool sync_bn) {
  auto place = launch::detect_rank_place(launch::process_env()).value_or_throw();
  dist::DdpOptions d;
  d.comm.backend = "gloo";
  d.comm.print_auto = false;
  const char* timeout = std::getenv("GPULAB_TEST_TIMEOUT");
  d.comm.timeout = std::chrono::seconds(timeout ? std::atoi(timeout) : 60);
  d.reducer.first_bucket_mb = 0.001;  // ~1 KB, then ~40 KB buckets: several buckets
  d.reducer.bucket_cap_mb = 0.04;
  if (const char* c = std::getenv("GPULAB_TEST_COMPRESSION")) d.reducer.compression = c;
  d.sync_bn = sync_bn;
  return std::make_unique<dist::DdpContext>(place, d);
}

// Rank side of the gradient tests.
int grads_scenario() {
  auto ctx = make_context(false);
  const int r = ctx->rank;
  torch::manual_seed(100 + r);  // different weights on each rank: the broadcast must fix that
  Net net;
  ctx->prepare_model(*net);
  auto tag = std::to_string(r);
  save_tensors("params" + tag, net->parameters());

  ctx->before_backward(*net, true);
  loss_of(net, ddp_batch(10 + r, 8)).backward();
  ctx->after_backward(*net);
  auto stats = ctx->reducer()->last_stats();
  save_tensors("grads" + tag, grads_of(net));
  save_tensors("stats" + tag, {torch::tensor({stats.buckets, stats.launched_during_backward})});

  // Gradient accumulation: the first micro-step must not communicate.
  for (auto& p : net->parameters()) p.mutable_grad().reset();
  ctx->before_backward(*net, false);
  (loss_of(net, ddp_batch(20 + r, 8)) / 2).backward();
  save_tensors("micro" + tag, grads_of(net));
  ctx->before_backward(*net, true);
  (loss_of(net, ddp_batch(30 + r, 8)) / 2).backward();
  ctx->after_backward(*net);
  save_tensors("accum" + tag, grads_of(net));
  return 0;
}
DistScenario grads_worker("grads", grads_scenario);

// Rank side of the SyncBatchNorm test: rank r trains on its slice of one global batch.
int syncbn_scenario() {
  auto ctx = make_context(true);
  const int r = ctx->rank, n = ctx->world_size;
  torch::manual_seed(1);
  Net net;
  ctx->prepare_model(*net);
  auto [x, y] = ddp_batch(42, 12);
  const int64_t local = 12 / n;
  auto mine = std::make_pair(x.narrow(0, r * local, local), y.narrow(0, r * local, local));
  ctx->before_backward(*net, true);
  loss_of(net, mine).backward();
  ctx->after_backward(*net);
  auto tag = std::to_string(r);
  save_tensors("grads" + tag, grads_of(net));
  save_tensors("running" + tag, {net->bn->running_mean.clone(), net->bn->running_var.clone()});
  return 0;
}
DistScenario syncbn_worker("syncbn", syncbn_scenario);

// Rank 1 never joins; rank 0's metric all-reduce must fail with a timeout naming it.
int timeout_scenario() {
  auto ctx = make_context(false);
  if (ctx->rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(30));
    return 0;
  }
  auto t = torch::ones({4}, torch::kFloat64);
  ctx->all_reduce_sum(t);
  return 0;
}
DistScenario timeout_worker("timeout", timeout_scenario);

fs::path ddp_out_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / ("gpulab-dist-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// The single-process reference: the mean over ranks of each rank's own gradients.
std::vector<torch::Tensor> reference_mean(int world, int64_t seed0, double scale,
                                          std::vector<torch::Tensor>* accumulate = nullptr) {
  torch::manual_seed(100);  // rank 0's initial weights
  Net net;
  std::vector<torch::Tensor> sum;
  for (int r = 0; r < world; ++r) {
    net->zero_grad();
    (loss_of(net, ddp_batch(seed0 + r, 8)) * scale).backward();
    auto g = grads_of(net);
    if (sum.empty()) {
      sum = g;
    } else {
      for (size_t i = 0; i < g.size(); ++i) sum[i] += g[i];
    }
  }
  for (auto& s : sum) s /= world;
  if (accumulate)
    for (size_t i = 0; i < sum.size(); ++i) (*accumulate)[i] += sum[i];
  return sum;
}

}  // namespace

class DistGrads : public ::testing::TestWithParam<int> {};

TEST_P(DistGrads, BroadcastBucketedMeanOverlapAndNoSync) {
  const int world = GetParam();
  auto dir = ddp_out_dir("grads" + std::to_string(world));
  auto r = run_ranks("grads", world, dir);
  ASSERT_EQ(r.exit_code, 0) << r.message;

  torch::manual_seed(100);
  Net rank0;
  auto want_params = rank0->parameters();
  auto want = reference_mean(world, 10, 1.0);
  auto want_accum = reference_mean(world, 20, 0.5);
  reference_mean(world, 30, 0.5, &want_accum);
  for (int rank = 0; rank < world; ++rank) {
    auto tag = std::to_string(rank);
    auto params = load_tensors(dir / ("params" + tag + ".pt"));
    auto grads = load_tensors(dir / ("grads" + tag + ".pt"));
    auto accum = load_tensors(dir / ("accum" + tag + ".pt"));
    ASSERT_EQ(grads.size(), want.size());
    // float32: the ranks' gradients are summed by Gloo's ring in another order than the
    // reference's loop, and each rank's backward may split its sums over other threads; measured
    // up to 4.7e-7 of a tensor's largest element (about 8 ulp). 1e-5 is 20x that; a gradient
    // averaged over the wrong count is off by 1/3 or more, a bucket left out by 1.
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(torch::equal(params[i], want_params[i])) << "rank " << rank << " param " << i;
      EXPECT_LT(max_rel_diff(grads[i], want[i]), 1e-5) << "rank " << rank << " grad " << i;
      EXPECT_LT(max_rel_diff(accum[i], want_accum[i]), 1e-5) << "rank " << rank << " accum " << i;
    }
    // After the no_sync micro-step each rank holds only its own gradient.
    torch::manual_seed(100);
    Net local;
    (loss_of(local, ddp_batch(20 + rank, 8)) / 2).backward();
    auto micro = load_tensors(dir / ("micro" + tag + ".pt"));
    auto own = grads_of(local);
    // The same arithmetic in another process (thread splits may differ): measured up to 4.5e-7;
    // a gradient all-reduced despite no_sync would be the mean over ranks, off by O(1).
    for (size_t i = 0; i < own.size(); ++i)
      EXPECT_LT(max_rel_diff(micro[i], own[i]), 1e-6) << "rank " << rank << " micro " << i;
    auto stats = load_tensors(dir / ("stats" + tag + ".pt"))[0];
    EXPECT_GE(stats[0].item<int64_t>(), 3) << "expected several buckets";
    EXPECT_GE(stats[1].item<int64_t>(), 1) << "no bucket started before backward ended";
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DistGrads, ::testing::Values(2, 3));

TEST(DistGrads, Fp16CompressionStaysClose) {
  auto dir = ddp_out_dir("fp16");
  auto r = run_ranks("grads", 2, dir, {{"GPULAB_TEST_COMPRESSION", "fp16"}});
  ASSERT_EQ(r.exit_code, 0) << r.message;
  auto want = reference_mean(2, 10, 1.0);
  auto grads = load_tensors(dir / "grads0.pt");
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, max_rel_diff(grads[i], want[i]));
  // Each rank's gradient rounded once to float16 (unit roundoff 2^-11 = 4.9e-4 of the value),
  // then summed and rounded back: at most about 2 roundings of the largest element, 1e-3; 2e-3
  // leaves 2x. A gradient sent uncompressed gives ~1e-7 (caught below), a wrong scale O(1).
  EXPECT_LT(worst, 2e-3);
  EXPECT_GT(worst, 0.0);  // it really went through half precision
  fs::remove_all(dir);
}

TEST(DistSyncBatchNorm, MatchesOneProcessOnTheGlobalBatch) {
  for (int world : {2, 3}) {
    auto dir = ddp_out_dir("syncbn" + std::to_string(world));
    auto r = run_ranks("syncbn", world, dir);
    ASSERT_EQ(r.exit_code, 0) << r.message;
    torch::manual_seed(1);
    Net net;
    loss_of(net, ddp_batch(42, 12)).backward();
    auto want = grads_of(net);
    for (int rank = 0; rank < world; ++rank) {
      auto tag = std::to_string(rank);
      auto grads = load_tensors(dir / ("grads" + tag + ".pt"));
      // float32 batch statistics summed over ranks instead of over one batch: measured up to
      // 7.1e-7 (gradients) and 9.8e-8 (running mean); 1e-5 is 14x. Per-rank statistics (no
      // sync) differ from the global ones by O(0.1).
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_LT(max_rel_diff(grads[i], want[i]), 1e-5) << world << " ranks, grad " << i;
      auto running = load_tensors(dir / ("running" + tag + ".pt"));
      EXPECT_LT(max_rel_diff(running[0], net->bn->running_mean), 1e-5);
      EXPECT_LT(max_rel_diff(running[1], net->bn->running_var), 1e-5);
    }
    fs::remove_all(dir);
  }
}

TEST(DistFailure, CollectiveTimeoutNamesTheOperationAndStopsTheGroup) {
  auto dir = ddp_out_dir("timeout");
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_ranks("timeout", 2, dir, {{"GPULAB_TEST_TIMEOUT", "2"}});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  ASSERT_TRUE(r.failure.has_value());
  EXPECT_EQ(r.failure->rank, 0);
  EXPECT_NE(r.message.find("collective timeout: metric all-reduce on rank 0"), std::string::npos)
      << r.message;
  EXPECT_LT(secs, 15.0);  // 2 s timeout + rendezvous, not rank 1's 30 s sleep
  fs::remove_all(dir);
}
