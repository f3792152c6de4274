// The communicator's byte counters (train/dist/comm_volume.h): Gloo's ring arithmetic against
// its conservation laws, and `gpulab train`'s per-step figures in metrics.jsonl (real ranks over
// Gloo, fp64, llama-tiny) against the formulas for DDP and for TP 2; `--tp 1` (the mesh's
// degenerate case, which `make gpu-check` runs on a GPU) trains as one process does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "train/dist/comm_volume.h"
#include "train/models/decoder_config.h"
#include "train/parallel/train_cli_compare.h"
#include "train/trainer_test_util.h"
#include "train/weights/safetensors.h"

namespace gpulab::train {
namespace {

using dist::gloo_allreduce_sent;
using dist::tree_broadcast_sent;
using testing::run_gpulab;
using testing::temp_dir;
namespace fs = std::filesystem;

// Every byte of a ring all-reduce reaches every other rank: summed over the p ranks, the
// reduce-scatter sends each chunk p - 1 times and so does the all-gather, 2 (p - 1) N in all,
// whatever Gloo's segment rounding; with equal chunks (N a multiple of 2 p elements, under the
// 1 MiB segment cap) each rank sends 2 (p - 1) / p N, and two ranks send N each in any case.
TEST(CommVolume, GlooRingSendsTwoPMinusOneOverPOfTheBuffer) {
  for (int p = 2; p <= 8; ++p) {
    for (int64_t elements : {1, 3, 7, 64, 1000, 65537, 300000, 1 << 20}) {
      for (int64_t e : {2, 4, 8}) {
        const int64_t n = elements * e;
        int64_t sum = 0;
        for (int r = 0; r < p; ++r) sum += gloo_allreduce_sent(n, e, r, p);
        EXPECT_EQ(sum, 2 * (p - 1) * n) << "p " << p << " bytes " << n;
        if (p == 2) {
          EXPECT_EQ(gloo_allreduce_sent(n, e, 1, 2), n) << n;
        }
      }
    }
    const int64_t even = 2 * p * 1000 * 4;  // 2 p segments of 4000 bytes
    for (int r = 0; r < p; ++r)
      EXPECT_EQ(gloo_allreduce_sent(even, 4, r, p), even * 2 * (p - 1) / p);
  }
  EXPECT_EQ(gloo_allreduce_sent(4096, 4, 0, 1), 0);  // a group of one sends nothing
}

// A tree broadcast sends the buffer to every rank but the root once.
TEST(CommVolume, TreeBroadcastReachesEveryOtherRankOnce) {
  for (int p = 1; p <= 9; ++p)
    for (int root = 0; root < p; ++root) {
      int64_t sum = 0;
      for (int r = 0; r < p; ++r) sum += tree_broadcast_sent(100, r, root, p);
      EXPECT_EQ(sum, 100 * (p - 1)) << "p " << p << " root " << root;
    }
}

// Two epochs of one step each (4 x 16 tokens), fp64, SGD, global-norm clipping, on Gloo.
std::vector<std::string> run_args(const fs::path& out, const std::vector<std::string>& more) {
  return testing::with(testing::with(testing::tiny_run(out, 2), {"--no_checkpoints"}), more);
}

// comm_per_step of each epoch record (one step each, so the figure is that step's).
std::vector<Json> step_volumes(const fs::path& run) {
  std::vector<Json> out;
  for (const auto& e : testing::epoch_records(run)) {
    EXPECT_TRUE(e.contains("comm_per_step")) << e.dump();
    if (e.contains("comm_per_step")) out.push_back(e["comm_per_step"]);
  }
  return out;
}

double sent_of(const Json& v, const std::string& kind) {
  return v["by_kind"].contains(kind) ? v["by_kind"][kind]["sent_bytes"].get<double>() : 0.0;
}

// DDP over two ranks, per step and rank (8-byte fp64 elements; Gloo's ring with p = 2 sends
// exactly each buffer's size, comm_volume.h): the gradient buckets hold every parameter once,
// P elements (the exported model's tensors: tied embeddings are one parameter there as in the
// model); the loop's stop-flag all-reduce before each step, 2 elements. Clipping reads the
// averaged gradients, which every rank has whole: no traffic. So 8 (P + 2) bytes, all of them
// all-reduce, every step alike.
TEST(CommVolumeCli, DdpStepMovesTheGradientsOnce) {
  const fs::path run = temp_dir("comm_ddp");
  auto r = run_gpulab(run_args(run, {"--nproc_per_node", "2"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto weights = read_safetensors(run / "model.safetensors").value().tensors;
  int64_t params = 0;
  for (const auto& [name, t] : weights) params += t.numel();
  const auto steps = step_volumes(run);
  ASSERT_EQ(steps.size(), 2u);
  for (const auto& v : steps) {
    EXPECT_EQ(v["sent_bytes"].get<double>(), 8.0 * static_cast<double>(params + 2)) << v.dump();
    EXPECT_EQ(sent_of(v, "all_reduce"), v["sent_bytes"].get<double>()) << v.dump();
  }
  std::printf("DDP 2 ranks: %.0f bytes per step and rank (%lld parameters)\n",
              steps[0]["sent_bytes"].get<double>(), static_cast<long long>(params));
  fs::remove_all(run);
}

// TP 2 with sequence parallelism, per step and rank, T = 4 x 16 tokens of width H, L blocks,
// fp64. Each of the 4 L + 2 crossings of a T x H activation between a sequence-split and a
// whole region (the embedding's output, two per block each way, the output layer's input)
// happens forward and transposed backward: as many reduce-scatters (Gloo has none: an
// all-reduce of T H, N bytes sent at p = 2) as all-gathers (this rank's T H / 2 to the other);
// (4 L + 2) T H (1 + 1/2) elements. The vocabulary-parallel loss all-reduces 3 T (max, target
// logit, sum of exponentials) and its next-token accuracy 2 T (the argmax's value, and its index
// in int64: 8 bytes too);
// the norms' gradients, summed over the sequence halves, (2 L + 1) H; replicated kv heads
// (fewer than 2) their k and v gradients; clipping the squared norm's partial sums (1); the stop
// flag over the TP group (2; over the data-parallel group of one it sends nothing).
// tests/train/parallel/tp_llama_test.cpp derives the same activation and loss terms for
// TpGroup's own count.
TEST(CommVolumeCli, Tp2StepMovesWhatTheFormulaSays) {
  const fs::path run = temp_dir("comm_tp2");
  auto r = run_gpulab(run_args(run, {"--tp", "2", "--nproc_per_node", "2"}), 600);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto c = find_decoder_config("llama-tiny").value();
  const int64_t t = 4 * 16, h = c.hidden_size, l = c.num_layers;
  const int64_t kv = c.num_kv_heads < 2 ? c.num_kv_heads * 2 * l * c.dim_per_head() * h : 0;
  const int64_t acts = (4 * l + 2) * t * h;
  const int64_t elements = acts + acts / 2 + 3 * t + 2 * t + (2 * l + 1) * h + kv + 1 + 2;
  const auto steps = step_volumes(run);
  ASSERT_EQ(steps.size(), 2u);
  for (const auto& v : steps) {
    EXPECT_EQ(v["sent_bytes"].get<double>(), 8.0 * static_cast<double>(elements)) << v.dump();
    EXPECT_EQ(sent_of(v, "all_gather"), 8.0 * static_cast<double>(acts / 2)) << v.dump();
  }
  std::printf("TP 2: %.0f bytes per step and rank\n", steps[0]["sent_bytes"].get<double>());
  fs::remove_all(run);
}

// --tp 1: the tensor-parallel model over a mesh of one rank (no launcher needed) trains as the
// plain model does. The same sums, but the vocabulary-parallel cross-entropy's gradient (softmax
// from the shifted exponentials and their sum) is computed in another order than libtorch's
// fused one: a few ulps (2.2e-16 relative) a step, carried linearly by SGD over two steps
// (measured 1.7e-16 on the weights). kTol, as tp_train_cli_test.cpp's, is a thousand-fold margin;
// a missing gradient sum or another batch shows at 1e-3 or more.
TEST(CommVolumeCli, Tp1IsTheMeshDegenerateCase) {
  constexpr double kTol = 1e-12;
  const fs::path one = temp_dir("comm_one"), mesh = temp_dir("comm_tp1");
  auto a = run_gpulab(run_args(one, {}), 600);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  auto b = run_gpulab(run_args(mesh, {"--tp", "1"}), 600);
  ASSERT_EQ(b.exit_code, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("Tensor parallel: 1 rank"), std::string::npos) << b.out;
  const auto ea = testing::epoch_records(one), eb = testing::epoch_records(mesh);
  ASSERT_EQ(ea.size(), 2u);
  ASSERT_EQ(eb.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const double x = ea[i]["test_loss"], y = eb[i]["test_loss"];
    EXPECT_LE(std::abs(x - y), kTol * std::abs(x)) << "epoch " << i + 1;
    EXPECT_FALSE(eb[i].contains("comm_per_step"));  // one process: nothing to count
  }
  testing::expect_same_weights(one, mesh, kTol);
  // Refused before training: what --tp above 1 refuses (here a family with no TP model).
  auto bad = run_gpulab({"train", "--model", "resnet18", "--tp", "1", "--dataset", "synthetic",
                         "--output_dir", (mesh / "bad").string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_FALSE(fs::exists(mesh / "bad" / "metrics.jsonl"));
  fs::remove_all(one);
  fs::remove_all(mesh);
}

}  // namespace
}  // namespace gpulab::train
