// The tensor-parallel Llama against the one-process Llama (fp64, Gloo, 2 and 4 real ranks started
// by the real launcher): built from the ordinary weights by shard_state, it gives the same loss
// and every gradient (gathered back to the ordinary layout), moves the bytes its formula says,
// and its weights gather back to the ordinary state dict exactly; the same with sequence
// parallelism. Layouts the shape does not fit are refused naming one that does.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>

#include "core/error.h"
#include "train/dist_worker.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/mesh_memory.h"
#include "train/parallel/mesh_plan.h"
#include "train/parallel/tp_llama.h"
#include "train/parallel/tp_llama_state.h"
#include "train/parallel/vocab_parallel_cross_entropy.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;
namespace fs = std::filesystem;
namespace F = torch::nn::functional;

namespace {

constexpr int64_t kLlamaBatch = 2, kLlamaSeq = 8;  // 8: sequence parallelism splits it 2 and 4 ways

struct Case {
  int tp;
  bool tied;
  bool fused;  // gpulab's fused attention kernel (both sides), or the attention core
  bool sp;     // sequence parallelism
  int kv = 4;  // key/value heads: 4 split over the ranks; 2 at TP 4, each kept by 2 ranks
};

// "tp4_sp_tied_fused_kv2": the case's test name, and how GoogleTest prints it (the default
// would print the struct's bytes, padding included, which differ between runs).
std::string case_name(const Case& k) {
  return "tp" + std::to_string(k.tp) + (k.sp ? "_sp" : "") + (k.tied ? "_tied" : "_untied") +
         (k.fused ? "_fused" : "_core") + "_kv" + std::to_string(k.kv);
}
void PrintTo(const Case& k, std::ostream* os) {
  *os << case_name(k);
}

// 8 query heads over 4 key/value heads (GQA, 2 queries per kv head): TP 4 leaves one kv head
// and its two query heads per rank; over 2 kv heads, TP 4 replicates each kv head on the two
// ranks whose query heads use it. 37 is a multiple of neither 2 nor 4 (vocabulary padding).
DecoderConfig tiny(bool tied, int kv = 4) {
  DecoderConfig c;
  c.name = "llama-tp-tiny";
  c.vocab_size = 37;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_layers = 2;
  c.num_heads = 8;
  c.num_kv_heads = kv;
  c.max_positions = 64;
  c.tie_word_embeddings = tied;
  return c;
}

// The one-process model in fp64 with weights of unit-scale activations (Hugging Face's 0.02
// would leave attention near uniform and the gradients tiny), from a fixed seed: every rank and
// the reference make the same one.
std::shared_ptr<LlamaForCausalLM> whole_model(const DecoderConfig& c) {
  torch::manual_seed(41);
  auto m = std::make_shared<LlamaForCausalLM>(c);
  m->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    auto& t = p.value();
    if (t.dim() == 2)
      t.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(t.size(1))));
    else
      t.normal_(1.0, 0.1);  // norm scales away from 1 so their gradients matter
  }
  return m;
}

std::pair<torch::Tensor, torch::Tensor> batch(const DecoderConfig& c) {
  torch::manual_seed(7);
  auto ids = torch::randint(c.vocab_size, {kLlamaBatch, kLlamaSeq});
  auto target = torch::randint(c.vocab_size, {kLlamaBatch, kLlamaSeq});
  target.index_put_({0, 1}, kIgnoreIndex);      // one position without a loss
  target.index_put_({1, 4}, c.vocab_size - 1);  // the last real id (next to the padding)
  return {ids, target};
}

Case case_from_env() {
  const char* e = std::getenv("GPULAB_TP_CASE");  // "tp,tied,fused,sp,kv"
  Case k{};
  int tied = 0, fused = 0, sp = 0;
  GPULAB_ASSERT(e && std::sscanf(e, "%d,%d,%d,%d,%d", &k.tp, &tied, &fused, &sp, &k.kv) == 5,
                "GPULAB_TP_CASE");
  k.tied = tied != 0;
  k.fused = fused != 0;
  k.sp = sp != 0;
  return k;
}

// Bytes glibc's heap has handed out and not taken back (small blocks and mmapped ones): libtorch's
// CPU tensors live there, so the growth over a forward pass is what it keeps for the backward.
int64_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return static_cast<int64_t>(mi.uordblks + mi.hblkhd);
}

// Whether `f` is refused as a usage error (1) or not (0).
int64_t refused(const std::function<void()>& f) {
  try {
    f();
  } catch (const Exception& e) {
    return e.code() == Code::kInvalidArgument ? 1 : 0;
  }
  return 0;
}

int tp_llama_scenario() {
  const Case k = case_from_env();
  const DecoderConfig c = tiny(k.tied, k.kv);
  dist::Communicator world = train::testing::worker_world();
  DeviceMesh mesh(world, world.size(), 1);
  TpGroup g(mesh.tp());
  const StateDict whole = module_state_dict(*whole_model(c));
  TpLlamaForCausalLM m(g, c, shard_state(c, whole, g.rank(), g.size()));
  m.set_fused_attention(k.fused);
  m.sequence_parallel = k.sp;
  auto [ids, target] = batch(c);
  m.loss(ids, target);  // a first forward pass (its graph dropped) makes libtorch's lazy buffers
  g.reset_bytes();
  const int64_t heap_before = heap_in_use();
  auto loss = m.loss(ids, target);
  const int64_t kept = heap_in_use() - heap_before;  // what the graph keeps for the backward
  loss.backward();
  m.finish_gradients();
  std::vector<torch::Tensor> out{loss.detach(), torch::tensor({g.bytes(), g.ring_bytes(), kept})};
  StateDict grads;  // by name, so they are pushed in name order (the parent's shard order)
  for (auto& p : m.named_parameters()) grads[p.key()] = p.value().grad();
  for (auto& [name, grad] : grads) out.push_back(grad);
  // The weights gathered over the group are the ordinary state dict, exactly.
  bool same = true;
  for (const auto& [name, t] : gather_state(c, module_state_dict(m), g))
    same = same && whole.count(name) && torch::equal(t, whole.at(name));
  // Refused: the unsplit weights on a group of 2 or 4; under sequence parallelism, a sequence
  // of 7 positions (odd: no TP size here splits it).
  const int64_t wrong_shard = refused([&] { TpLlamaForCausalLM wrong(g, c, whole); });
  const int64_t odd_sequence = k.sp ? refused([&] {
    m.forward(torch::zeros({1, 7}, torch::kInt64));
  })
                                    : 1;
  out.push_back(torch::tensor({int64_t{same}, wrong_shard, odd_sequence}));
  train::testing::save_tensors("tp" + std::to_string(g.rank()), out);
  return 0;
}
train::testing::DistScenario tp_llama_worker("tp_llama", tp_llama_scenario);

// The reference: loss and gradients of the whole model, by parameter name.
std::pair<torch::Tensor, StateDict> reference(const DecoderConfig& c, bool fused) {
  auto m = whole_model(c);
  m->set_fused_attention(fused);
  auto [ids, target] = batch(c);
  auto logits = m->forward(ids);
  auto loss = F::cross_entropy(logits.view({-1, c.vocab_size}), target.view({-1}),
                               F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
  loss.backward();
  StateDict grads;
  for (auto& p : m->named_parameters()) grads[p.key()] = p.value().grad();
  return {loss.detach(), grads};
}

// Communication per rank and step, T = B S tokens of width H, L blocks, p ranks, fp64 (8 bytes).
// Payload handed to the collectives (TpGroup::bytes):
//  TP: forward, the embedding's all-reduce (T H), two row-parallel all-reduces per block
//    (attention output, MLP down: 2 L T H) and the loss's max and two sums (3 T); backward, the
//    two copy regions per block (q/k/v input, gate/up input: 2 L T H) and the output layer's
//    (T H); the row-parallel and embedding reductions are identities backward. In all
//    T (H (4 L + 2) + 3): Megatron's two all-reduces per block forward and two backward.
//  SP: each T H crossing becomes a reduce-scatter (payload T H) or an all-gather (payload
//    T H / p): forward the embedding's reduce-scatter, per block two gathers and two
//    reduce-scatters, the output layer's gather; backward their transposes, as many. So
//    (4 L + 2) T H (1 + 1/p) + 3 T, plus the norm gradients' all-reduce (2 L + 1) H.
// On a ring (TpGroup::ring_bytes, f = (p-1)/p), an all-reduce of N sends 2 f N, an all-gather
// or a reduce-scatter f N: TP 2 f T (H (4 L + 2) + 3); SP the same plus 2 f (2 L + 1) H for the
// norm gradients. Sequence parallelism moves what TP moves; what it saves is activation memory.
// Replicated kv heads (KV < p) add one all-reduce of a slot per kv head of the local k and v
// gradients, KV 2 L D H elements (D the head size).
struct Bytes {
  int64_t payload, ring;
};

Bytes formula(const Case& k, const DecoderConfig& c) {
  const int64_t t = kLlamaBatch * kLlamaSeq, h = c.hidden_size, l = c.num_layers, p = k.tp;
  const int64_t acts = (4 * l + 2) * t * h, norms = (2 * l + 1) * h;
  const int64_t kv = c.num_kv_heads < p ? c.num_kv_heads * 2 * l * c.dim_per_head() * h : 0;
  if (!k.sp) return {8 * (acts + 3 * t + kv), 8 * 2 * (p - 1) * (acts + 3 * t + kv) / p};
  return {8 * (acts + acts / p + 3 * t + norms + kv),
          8 * (p - 1) * (2 * acts + 6 * t + 2 * norms + 2 * kv) / p};
}

// One layer's activation memory on one rank by Korthikanti et al.'s formula (mesh_memory.h), in
// fp64, for the printout: what sequence parallelism saves (a formula, not a measurement).
int64_t activations_per_layer(const Case& k, const DecoderConfig& c) {
  MeshMemoryQuery q;
  q.model = decoder_shape(c);
  q.tp = k.tp;
  q.seq_len = kLlamaSeq;
  q.micro_batch = kLlamaBatch;
  q.sequence_parallel = k.sp;
  q.activation_bytes = 8;
  return layer_activation_bytes(q);
}

// Starts the ranks of case `k`; returns what each wrote.
std::vector<std::vector<torch::Tensor>> run_case(const Case& k) {
  auto dir = fs::temp_directory_path() / ("gpulab-tp-llama-" + std::to_string(::getpid()));
  const std::string spec = std::to_string(k.tp) + "," + std::to_string(k.tied) + "," +
                           std::to_string(k.fused) + "," + std::to_string(k.sp) + "," +
                           std::to_string(k.kv);
  // One malloc arena: mallinfo2 reports the main arena only, and a thread may otherwise move to
  // another one under contention (heap_in_use).
  return train::testing::run_ranks_for_tensors(
      "tp_llama", k.tp, dir, "tp", {{"GPULAB_TP_CASE", spec}, {"MALLOC_ARENA_MAX", "1"}});
}

// Each rank's gradients under its parameters' names (the shard's names, in map order), after
// checking the flags it wrote last.
void rank_gradients(const Case& k, const DecoderConfig& c,
                    const std::vector<std::vector<torch::Tensor>>& got,
                    std::vector<StateDict>& grads) {
  const StateDict names = shard_state(c, module_state_dict(*whole_model(c)), 0, k.tp);
  grads.assign(static_cast<size_t>(k.tp), {});
  for (int rank = 0; rank < k.tp; ++rank) {
    const auto& g = got[static_cast<size_t>(rank)];
    ASSERT_EQ(g.size(), names.size() + 3);
    size_t i = 2;
    for (const auto& [name, t] : names) grads[static_cast<size_t>(rank)][name] = g[i++];
    EXPECT_EQ(g.back()[0].item<int64_t>(), 1) << "weights gathered back on rank " << rank;
    EXPECT_EQ(g.back()[1].item<int64_t>(), 1) << "wrong shard refused on rank " << rank;
    EXPECT_EQ(g.back()[2].item<int64_t>(), 1) << "odd sequence refused on rank " << rank;
  }
}

// Tolerance: the split model differs from the whole one only in the order of its sums. A
// row-parallel product's dot products (n = 64 or 96 terms) become tp partial sums added by the
// all-reduce (or the reduce-scatter); the copy regions add tp partial input gradients; the
// softmax's denominator is summed per slice, then across; under sequence parallelism the norm
// gradients are summed over each rank's positions, then across. Reordering n terms moves a sum
// by at most n u sum|terms| (u = 2^-53 = 1.1e-16): with n <= 96 and sum|terms| within ~10x of
// the largest element of these unit-scale tensors, ~1e-13 per sum; the two blocks chain a few
// such sums, which stays below 1e-12 relative to each tensor's largest element.
constexpr double kTol = 1e-12;

// Checks the replicated gradients on every rank, the padding rows and the gathered gradients
// against the reference; returns the largest relative difference seen.
double compare_gradients(const Case& k, const DecoderConfig& c, const std::vector<StateDict>& grads,
                         const StateDict& want) {
  double worst = 0;
  for (size_t rank = 0; rank < grads.size(); ++rank)
    for (const auto& [name, t] : grads[rank]) {
      const size_t holders = static_cast<size_t>(kv_replicas(c, k.tp));
      if (tp_kv_rows(name) && holders > 1) {  // a shared kv head: the same sum on every holder
        EXPECT_TRUE(torch::equal(t, grads[rank - rank % holders].at(name))) << name << " " << rank;
      }
      if (tp_split_dim(name) >= 0) continue;  // replicated ones: every rank's own gradient
      const double d = train::testing::max_rel_diff(t, want.at(name));
      EXPECT_LT(d, kTol) << name << " on rank " << rank;
      worst = std::max(worst, d);
    }
  // The padding rows of the vocabulary get no gradient at all (the last rank holds them).
  const int64_t pad = padded_to(c.vocab_size, k.tp) - c.vocab_size;
  for (const auto& [name, t] : grads.back()) {
    if (tp_vocab_rows(name)) {
      EXPECT_TRUE(t.narrow(0, t.size(0) - pad, pad).eq(0).all().item<bool>()) << name;
    }
  }
  const StateDict gathered = gather_state(c, grads);
  EXPECT_EQ(gathered.size(), want.size());
  for (const auto& [name, t] : want) {
    auto it = gathered.find(name);
    if (it == gathered.end() || it->second.sizes() != t.sizes()) {
      ADD_FAILURE() << name << " is missing or has the wrong shape";
      continue;
    }
    const double d = train::testing::max_rel_diff(it->second, t);
    EXPECT_LT(d, kTol) << name;
    worst = std::max(worst, d);
  }
  return worst;
}

class TpLlama : public ::testing::TestWithParam<Case> {};

TEST_P(TpLlama, LossAndEveryGradientMatchOneProcess) {
  const Case k = GetParam();
  const DecoderConfig c = tiny(k.tied, k.kv);
  const auto got = run_case(k);
  ASSERT_EQ(got.size(), static_cast<size_t>(k.tp));
  const auto [want_loss, want] = reference(c, k.fused);
  std::vector<StateDict> grads;
  rank_gradients(k, c, got, grads);
  ASSERT_EQ(grads.size(), got.size());
  double worst = compare_gradients(k, c, grads, want);
  const Bytes want_bytes = formula(k, c);
  for (int rank = 0; rank < k.tp; ++rank) {
    const double d = train::testing::max_rel_diff(got[rank][0], want_loss);
    EXPECT_LT(d, kTol) << "loss on rank " << rank;
    worst = std::max(worst, d);
    EXPECT_EQ(got[rank][1][0].item<int64_t>(), want_bytes.payload) << "rank " << rank;
    EXPECT_EQ(got[rank][1][1].item<int64_t>(), want_bytes.ring) << "rank " << rank;
  }
  std::printf(
      "TP %d%s Llama (%d kv heads, %s, %s attention): loss %.15f (one process %.15f), largest "
      "relative "
      "difference over the loss and %zu gradients %.3g; bytes per rank and step: %lld handed "
      "(formula %lld), %lld on a ring (formula %lld); activations kept by the forward pass on "
      "rank 0 %lld bytes (measured), per layer by Korthikanti's formula %lld bytes\n",
      k.tp, k.sp ? " + SP" : "", k.kv, k.tied ? "tied" : "untied", k.fused ? "fused" : "core",
      got[0][0].item<double>(), want_loss.item<double>(), want.size(), worst,
      static_cast<long long>(got[0][1][0].item<int64_t>()),
      static_cast<long long>(want_bytes.payload),
      static_cast<long long>(got[0][1][1].item<int64_t>()), static_cast<long long>(want_bytes.ring),
      static_cast<long long>(got[0][1][2].item<int64_t>()),
      static_cast<long long>(activations_per_layer(k, c)));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TpLlama,
                         ::testing::Values(Case{2, false, true, false}, Case{2, true, false, false},
                                           Case{4, false, false, false}, Case{2, false, true, true},
                                           Case{4, true, false, true},
                                           Case{4, false, false, false, 2},
                                           Case{4, false, false, true, 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return case_name(info.param);
                         });

TEST(TpLlamaLayout, RefusesATpSizeTheHeadsDoNotFitNamingOneThatDoes) {
  DecoderConfig c = tiny(false);
  c.num_heads = 12;
  c.num_kv_heads = 6;  // 4 neither divides 6 nor is a multiple of it; 3 divides all
  EXPECT_NO_THROW(check_tp_layout(c, 2));
  EXPECT_NO_THROW(check_tp_layout(c, 12));  // each of the 6 kv heads kept by 2 ranks
  try {
    check_tp_layout(c, 4);
    FAIL() << "TP 4 over 6 kv heads was accepted";
  } catch (const Exception& e) {
    EXPECT_EQ(e.code(), Code::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("6 key/value heads"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--tp 3"), std::string::npos) << e.hint();
  }
  c = tiny(false);
  c.intermediate_size = 90;  // 4 does not divide the FFN width; 2 does
  EXPECT_THROW(check_tp_layout(c, 4), Exception);
  EXPECT_THROW(check_tp_layout(c, 0), Exception);
}

TEST(TpLlamaLayout, ShardsGatherBackToTheOrdinaryStateDict) {
  const DecoderConfig c = tiny(false);
  const StateDict whole = module_state_dict(*whole_model(c));
  std::vector<StateDict> shards;
  for (int r = 0; r < 4; ++r) shards.push_back(shard_state(c, whole, r, 4));
  EXPECT_EQ(shards[3].at("model.embed_tokens.weight").size(0), 10);  // 37 padded to 40
  EXPECT_EQ(shards[1].at("model.layers.0.self_attn.o_proj.weight").size(1), 16);
  const StateDict back = gather_state(c, shards);
  ASSERT_EQ(back.size(), whole.size());
  for (const auto& [name, t] : whole) EXPECT_TRUE(torch::equal(back.at(name), t)) << name;
  shards[2].erase("model.norm.weight");
  EXPECT_THROW(gather_state(c, shards), Exception);
  // 2 kv heads over 4 ranks: ranks 0 and 1 keep head 0, ranks 2 and 3 head 1.
  const DecoderConfig gqa = tiny(false, 2);
  const StateDict whole2 = module_state_dict(*whole_model(gqa));
  const std::string k = "model.layers.1.self_attn.k_proj.weight";
  std::vector<StateDict> kv_shards;
  for (int r = 0; r < 4; ++r) kv_shards.push_back(shard_state(gqa, whole2, r, 4));
  EXPECT_TRUE(torch::equal(kv_shards[1].at(k), whole2.at(k).narrow(0, 0, 8)));
  EXPECT_TRUE(torch::equal(kv_shards[2].at(k), whole2.at(k).narrow(0, 8, 8)));
  const StateDict back2 = gather_state(gqa, kv_shards);
  for (const auto& [name, t] : whole2) EXPECT_TRUE(torch::equal(back2.at(name), t)) << name;
}

}  // namespace
