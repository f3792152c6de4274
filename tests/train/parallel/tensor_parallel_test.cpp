// Tensor parallelism against one process (fp64, Gloo, 2 and 4 real ranks started by the real
// launcher): an attention-free block stack made of a vocabulary-parallel embedding,
// column -> row parallel MLPs (split and gathered forms) and a vocabulary-parallel head and
// cross-entropy gives the loss and every gradient of the same model computed whole, and moves
// the bytes its formula says.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>

#include "core/error.h"
#include "train/dist_worker.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/tp_layers.h"
#include "train/parallel/vocab_parallel_cross_entropy.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;
namespace fs = std::filesystem;
namespace F = torch::nn::functional;

namespace {

constexpr int64_t kHidden = 16, kFfn = 32, kBatch = 2, kSeq = 5;

// The whole model's weights (vocabulary rows unpadded) and one batch, from a fixed seed: the
// ranks and the reference make the same ones.
struct Whole {
  torch::Tensor emb, head;                                // [V, H]
  std::vector<torch::Tensor> ln_w, ln_b, w1, b1, w2, b2;  // per block
  torch::Tensor ids, target;                              // [B, S]
};

Whole make_whole(int64_t vocab) {
  torch::manual_seed(41);
  auto o = torch::TensorOptions().dtype(torch::kFloat64);
  Whole w;
  w.emb = torch::randn({vocab, kHidden}, o);
  w.head = torch::randn({vocab, kHidden}, o) * 0.3;
  for (int b = 0; b < 2; ++b) {
    w.ln_w.push_back(1 + 0.1 * torch::randn({kHidden}, o));
    w.ln_b.push_back(0.1 * torch::randn({kHidden}, o));
    w.w1.push_back(torch::randn({kFfn, kHidden}, o) * 0.25);
    w.b1.push_back(torch::randn({kFfn}, o) * 0.1);
    w.w2.push_back(torch::randn({kHidden, kFfn}, o) * 0.18);
    w.b2.push_back(torch::randn({kHidden}, o) * 0.1);
  }
  w.ids = torch::randint(vocab, {kBatch, kSeq});
  w.target = torch::randint(vocab, {kBatch, kSeq});
  w.target.index_put_({0, 1}, kIgnoreIndex);  // one position without a loss
  w.target.index_put_({1, 4}, vocab - 1);     // the last real id (next to the padding)
  return w;
}

// Padding rows with values of their own: if they leaked into the loss, the check would see it.
torch::Tensor padded(const torch::Tensor& t, int64_t rows) {
  if (rows == t.size(0)) return t;
  return torch::cat({t, 5 + torch::rand({rows - t.size(0), t.size(1)}, t.options())});
}

torch::Tensor block_whole(const Whole& w, int b, const torch::Tensor& h) {
  auto u = F::layer_norm(h, F::LayerNormFuncOptions({kHidden}).weight(w.ln_w[b]).bias(w.ln_b[b]));
  return h + F::linear(torch::gelu(F::linear(u, w.w1[b], w.b1[b])), w.w2[b], w.b2[b]);
}

// The reference: the same model in one process, unsplit, with torch's own cross-entropy.
std::vector<torch::Tensor> reference(int64_t vocab) {
  Whole w = make_whole(vocab);
  std::vector<torch::Tensor*> params{&w.emb, &w.head};
  for (int b = 0; b < 2; ++b)
    for (auto* p : {&w.ln_w[b], &w.ln_b[b], &w.w1[b], &w.b1[b], &w.w2[b], &w.b2[b]})
      params.push_back(p);
  for (auto* p : params) p->requires_grad_(true);
  auto h = F::embedding(w.ids, w.emb);
  for (int b = 0; b < 2; ++b) h = block_whole(w, b, h);
  auto logits = F::linear(h, w.head);
  auto loss = F::cross_entropy(logits.view({-1, vocab}), w.target.view({-1}),
                               F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
  loss.backward();
  std::vector<torch::Tensor> out{loss.detach()};
  for (auto* p : params) out.push_back(p->grad());
  return out;
}

// The tensor-parallel model on this rank: its slices of the whole weights.
struct TpModel {
  TpModel(TpGroup& g, const Whole& w, int64_t vocab)
      : emb(g, vocab, kHidden), head(g, kHidden, padded_to(vocab, g.size()), false, false) {
    const int r = g.rank(), n = g.size();
    const int64_t vp = padded_to(vocab, n);
    torch::NoGradGuard no_grad;
    emb->weight.copy_(shard_of(padded(w.emb, vp), 0, r, n));
    head->weight.copy_(shard_of(padded(w.head, vp), 0, r, n));
    for (int b = 0; b < 2; ++b) {
      // Block 0 keeps the FFN activations split (column -> row directly); block 1 gathers them
      // and lets the row-parallel layer split them again (the other two region crossings).
      col.emplace_back(g, kHidden, kFfn, true, /*gather_output=*/b == 1);
      row.emplace_back(g, kFfn, kHidden, true, /*input_is_parallel=*/b == 0);
      col[b]->weight.copy_(shard_of(w.w1[b], 0, r, n));
      col[b]->bias.copy_(shard_of(w.b1[b], 0, r, n));
      row[b]->weight.copy_(shard_of(w.w2[b], 1, r, n));
      row[b]->bias.copy_(w.b2[b]);
      ln_w.push_back(w.ln_w[b].clone().requires_grad_(true));  // replicated on every rank
      ln_b.push_back(w.ln_b[b].clone().requires_grad_(true));
    }
  }

  torch::Tensor loss(TpGroup& g, const Whole& w, int64_t vocab) {
    auto h = emb(w.ids);
    for (int b = 0; b < 2; ++b) {
      auto u = F::layer_norm(h, F::LayerNormFuncOptions({kHidden}).weight(ln_w[b]).bias(ln_b[b]));
      h = h + row[b](torch::gelu(col[b](u)));
    }
    const int64_t start = g.rank() * (padded_to(vocab, g.size()) / g.size());
    auto per = vocab_parallel_cross_entropy(head(h), w.target, g, start, vocab);
    return per.sum() / (w.target != kIgnoreIndex).sum();
  }

  std::vector<torch::Tensor> grads() {
    std::vector<torch::Tensor> out{emb->weight.grad(), head->weight.grad()};
    for (int b = 0; b < 2; ++b)
      for (auto& p : {ln_w[b], ln_b[b], col[b]->weight, col[b]->bias, row[b]->weight, row[b]->bias})
        out.push_back(p.grad());
    return out;
  }

  VocabParallelEmbedding emb;
  ColumnParallelLinear head;
  std::vector<ColumnParallelLinear> col;
  std::vector<RowParallelLinear> row;
  std::vector<torch::Tensor> ln_w, ln_b;
};

// How many of the layers' refusals of bad input come as a gpulab usage error (kInvalidArgument):
// a width TP does not divide, a token id or a target outside the vocabulary.
int64_t refusals(TpGroup& g, int64_t vocab) {
  auto refused = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Exception& e) {
      return e.code() == Code::kInvalidArgument ? 1 : 0;
    }
    return 0;
  };
  const auto ids = torch::full({1, 2}, vocab, torch::kInt64);
  VocabParallelEmbedding emb(g, vocab, kHidden);
  const auto logits = torch::zeros({1, 2, padded_to(vocab, g.size()) / g.size()});
  return refused([&] { ColumnParallelLinear(g, kHidden, kFfn + 1, true, false); }) +
         refused([&] { RowParallelLinear(g, kFfn + 1, kHidden, true, true); }) +
         refused([&] { emb(ids); }) +
         refused([&] { vocab_parallel_cross_entropy(logits, ids, g, 0, vocab); });
}

int tp_scenario() {
  const int64_t vocab = std::atoll(std::getenv("GPULAB_TP_VOCAB"));
  torch::set_default_dtype(caffe2::TypeMeta::Make<double>());
  dist::Communicator world = train::testing::worker_world();
  DeviceMesh mesh(world, world.size(), 1);
  TpGroup g(mesh.tp());
  Whole w = make_whole(vocab);
  TpModel m(g, w, vocab);
  g.reset_bytes();
  auto loss = m.loss(g, w, vocab);
  loss.backward();
  std::vector<torch::Tensor> out{loss.detach()};
  for (auto& t : m.grads()) out.push_back(t);
  out.push_back(torch::tensor({refusals(g, vocab)}, torch::kInt64));
  out.push_back(torch::tensor({g.bytes()}, torch::kInt64));
  train::testing::save_tensors("tp" + std::to_string(g.rank()), out);
  return 0;
}
train::testing::DistScenario tp_worker("tp_block", tp_scenario);

// Which gradients are split, and along which dimension (-1: replicated), in grads() order.
int split_dim(size_t i) {
  if (i < 2) return 0;                                   // embedding and head rows (the vocabulary)
  static const int per_block[] = {-1, -1, 0, 0, 1, -1};  // ln w, ln b, w1, b1, w2, b2
  return per_block[(i - 2) % 6];
}

class TensorParallel : public ::testing::TestWithParam<std::pair<int, int64_t>> {};

TEST_P(TensorParallel, LossAndEveryGradientMatchOneProcess) {
  const auto [tp, vocab] = GetParam();
  auto dir = fs::temp_directory_path() / ("gpulab-tp-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto r =
      train::testing::run_ranks("tp_block", tp, dir, {{"GPULAB_TP_VOCAB", std::to_string(vocab)}});
  ASSERT_EQ(r.exit_code, 0) << r.message;
  auto want = reference(vocab);
  std::vector<std::vector<torch::Tensor>> got;
  for (int rank = 0; rank < tp; ++rank)
    got.push_back(train::testing::load_tensors(dir / ("tp" + std::to_string(rank) + ".pt")));
  fs::remove_all(dir);
  // Tolerance: the split model differs from the whole one only in the order of its sums (a
  // dot product of F = 32 terms becomes tp partial sums added by the all-reduce; the embedding
  // adds exact zeros; the softmax's denominator is summed per slice, then across). Reordering
  // n terms moves a sum by at most n u sum|terms| (u = 2^-53 = 1.1e-16): with n <= 32 and
  // sum|terms| within ~10x of the largest element here, ~3.5e-14 per sum, a few sums deep
  // (< 10 chained) stays below 1e-12 relative to each tensor's largest element.
  double worst = 0;
  for (int rank = 0; rank < tp; ++rank) {
    const double d = train::testing::max_rel_diff(got[rank][0], want[0]);
    EXPECT_LT(d, 1e-12) << "loss on rank " << rank;
    worst = std::max(worst, d);
  }
  for (int rank = 0; rank < tp; ++rank)
    EXPECT_EQ(got[rank][got[rank].size() - 2].item<int64_t>(), 4) << "refusals on rank " << rank;
  for (size_t i = 0; i + 1 < want.size(); ++i) {
    const int dim = split_dim(i);
    for (int rank = 0; rank < (dim < 0 ? tp : 1); ++rank) {
      torch::Tensor g = got[rank][1 + i];
      if (dim >= 0) {
        std::vector<torch::Tensor> parts;
        for (int k = 0; k < tp; ++k) parts.push_back(got[k][1 + i]);
        g = torch::cat(parts, dim);
      }
      if (i < 2) {  // the padding rows get no gradient at all
        EXPECT_EQ(g.size(0), padded_to(vocab, tp));
        EXPECT_TRUE(g.narrow(0, vocab, g.size(0) - vocab).eq(0).all().item<bool>()) << i;
        g = g.narrow(0, 0, vocab);
      }
      ASSERT_EQ(g.sizes(), want[1 + i].sizes()) << "gradient " << i;
      const double d = train::testing::max_rel_diff(g, want[1 + i]);
      EXPECT_LT(d, 1e-12) << "gradient " << i << " rank " << rank;
      worst = std::max(worst, d);
    }
  }
  // Bytes handed to collectives per rank and step, T = B*S tokens of width H: forward, the
  // embedding's and two row-parallel all-reduces (3 T H), the gathered block's FFN slice
  // (T F/tp), the loss's max and two sums (3 T); backward, three copy-region all-reduces (two
  // blocks and the head, 3 T H) and the scatter's gather (T F/tp). fp64: 8 bytes each.
  const int64_t t = kBatch * kSeq;
  const int64_t formula = 8 * t * (6 * kHidden + 2 * kFfn / tp + 3);
  for (int rank = 0; rank < tp; ++rank)
    EXPECT_EQ(got[rank].back().item<int64_t>(), formula) << "rank " << rank;
  std::printf(
      "TP %d, vocabulary %lld (padded %lld): largest relative difference %.3g; %lld bytes "
      "per rank and step (formula %lld)\n",
      tp, static_cast<long long>(vocab), static_cast<long long>(padded_to(vocab, tp)), worst,
      static_cast<long long>(got[0].back().item<int64_t>()), static_cast<long long>(formula));
}

// 33 is not a multiple of 2 or 4: at TP 4 (padded to 36) the last rank holds padding alone.
INSTANTIATE_TEST_SUITE_P(Sizes, TensorParallel,
                         ::testing::Values(std::make_pair(2, int64_t{32}),
                                           std::make_pair(2, int64_t{33}),
                                           std::make_pair(4, int64_t{33})));

}  // namespace
