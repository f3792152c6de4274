// Pipeline parallelism against the one-process model (fp64, Gloo, real ranks started by the real
// launcher): Llama and GPT-2, 1F1B and the interleaved schedule, untied and tied embeddings.
// Each stage is built from the ordinary weights; over 5 SGD steps the loss of every step, the
// first step's gradients (gathered back to the ordinary layout) and the final weights equal the
// one-process run's; each rank holds about 1/P of the parameter bytes; the executed schedule's
// idle slots are (P-1)/(V·M+P-1), and the wall-time idle fraction is printed beside them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <ostream>
#include <string>

#include "core/error.h"
#include "train/dist_worker.h"
#include "train/models/lm_families.h"
#include "train/parallel/device_mesh.h"
#include "train/parallel/pipeline_executor.h"
#include "train/parallel/pipeline_timeline.h"
#include "train/parallel/vocab_parallel_cross_entropy.h"

using namespace gpulab;
using namespace gpulab::train;
using namespace gpulab::train::parallel;
namespace fs = std::filesystem;
namespace F = torch::nn::functional;

namespace {

constexpr int64_t kSeq = 8, kMicroRows = 2;  // each micro-batch 2 x 8 tokens
constexpr int kSteps = 5;
// SGD with momentum, not Adam: a key projection's bias has no gradient in exact arithmetic (the
// softmax ignores a shift shared by all keys), so its gradient is rounding noise, which Adam
// divides by its eps (1e-8) into updates of 1e-11 that differ between any two summation orders.
// SGD's step is linear in the gradient and carries the gradients' 1e-14 over unchanged.
constexpr double kLr = 0.1, kMomentum = 0.9;

struct Case {
  bool gpt2;
  int pp;
  int virtual_stages;
  int micro;
  bool tied;
  bool wide = false;  // hidden 256: compute per micro-batch well above a message's latency
};

std::string case_name(const Case& k) {
  return std::string(k.gpt2 ? "gpt2" : "llama") + "_pp" + std::to_string(k.pp) +
         (k.virtual_stages > 1 ? "_v" + std::to_string(k.virtual_stages) : "") + "_m" +
         std::to_string(k.micro) + (k.tied ? "_tied" : "_untied") + (k.wide ? "_wide" : "");
}
void PrintTo(const Case& k, std::ostream* os) {
  *os << case_name(k);
}

// 4 blocks (two per stage, or one per chunk of the interleaved schedule), a vocabulary small
// beside a block so that parameters split near 1/P.
DecoderConfig tiny(const Case& k) {
  DecoderConfig c;
  c.name = k.gpt2 ? "gpt2-pp-tiny" : "llama-pp-tiny";
  c.family = k.gpt2 ? "gpt2" : "llama";
  c.vocab_size = 37;
  c.hidden_size = k.wide ? 256 : 64;
  c.intermediate_size = k.gpt2 ? 4 * c.hidden_size : 3 * c.hidden_size / 2;
  c.num_layers = 4;
  c.num_heads = k.gpt2 ? 4 : 8;
  c.num_kv_heads = k.gpt2 ? 4 : 4;
  c.max_positions = 64;
  c.tie_word_embeddings = k.tied;
  return c;
}

// The one-process model in fp64, unit-scale weights from a fixed seed (every rank and the
// reference make the same one): HF's 0.02 would leave the gradients tiny.
CausalLmPtr whole_model(const DecoderConfig& c) {
  torch::manual_seed(41);
  auto m = build_causal_lm(c);
  m->to(torch::kDouble);
  torch::NoGradGuard no_grad;
  for (auto& p : m->named_parameters()) {
    auto& t = p.value();
    if (t.dim() == 2)
      t.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(std::max(t.size(0), t.size(1)))));
    else
      t.normal_(1.0, 0.1);  // norm scales and biases away from their defaults
  }
  return m;
}

std::pair<torch::Tensor, torch::Tensor> batch(const DecoderConfig& c, int micro) {
  torch::manual_seed(7);
  auto ids = torch::randint(c.vocab_size, {kMicroRows * micro, kSeq});
  auto target = torch::randint(c.vocab_size, {kMicroRows * micro, kSeq});
  target.index_put_({0, 1}, kIgnoreIndex);  // positions without a loss, in two micro-batches
  target.index_put_({kMicroRows * micro - 1, 5}, kIgnoreIndex);
  return {ids, target};
}

Case case_from_env() {
  const char* e = std::getenv("GPULAB_PP_CASE");  // "gpt2,pp,virtual,micro,tied,wide"
  Case k{};
  int gpt2 = 0, tied = 0, wide = 0;
  GPULAB_ASSERT(e && std::sscanf(e, "%d,%d,%d,%d,%d,%d", &gpt2, &k.pp, &k.virtual_stages, &k.micro,
                                 &tied, &wide) == 6,
                "GPULAB_PP_CASE");
  k.gpt2 = gpt2 != 0;
  k.tied = tied != 0;
  k.wide = wide != 0;
  return k;
}

// Every ordinary name's tensor from `mine` in the ordinary order; an empty tensor for the names
// this stage does not hold, so that the parent reads them back by position.
void push_by_name(const StateDict& names, const StateDict& mine, std::vector<torch::Tensor>& out) {
  for (const auto& [name, t] : names) {
    auto it = mine.find(name);
    out.push_back(it == mine.end() ? torch::empty({0}, torch::kDouble) : it->second.clone());
  }
}

int pipeline_lm_scenario() {
  const Case k = case_from_env();
  const DecoderConfig c = tiny(k);
  dist::Communicator world = train::testing::worker_world();
  DeviceMesh mesh(world, 1, world.size());
  const PipelineShape shape{k.pp, k.virtual_stages, k.micro};
  const StateDict whole = module_state_dict(*whole_model(c));
  PipelineStage stage(
      c, shape, split_stages(c.num_layers, k.pp, k.virtual_stages, decoder_stage_costs(c, kSeq)),
      mesh.coord().pp, whole);
  PipelineExecutor pipe(stage, mesh.pp());
  torch::optim::SGD opt(stage.parameters(), torch::optim::SGDOptions(kLr).momentum(kMomentum));
  auto [ids, target] = batch(c, k.micro);
  std::vector<double> losses;
  StateDict grads;
  double wall = 0, wait = 0;  // over steps 2-5 (the first makes libtorch's lazy buffers)
  std::vector<PipeAction> executed;
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    const PipelineStepResult r = pipe.step(ids, target);
    losses.push_back(r.loss);
    if (step == 0) {
      for (const auto& p : stage.model().named_parameters())
        if (!p.value().is_meta()) grads[p.key()] = p.value().grad().clone();
      executed = r.executed;
    } else {
      wall += r.wall_s;
      wait += r.wait_s;
    }
    opt.step();
  }
  std::vector<torch::Tensor> out{
      torch::tensor(losses, torch::kDouble),
      torch::tensor({static_cast<double>(stage.parameter_bytes()), wall, wait}, torch::kDouble)};
  auto acts = torch::zeros({static_cast<int64_t>(executed.size()), 3}, torch::kLong);
  for (size_t i = 0; i < executed.size(); ++i) {
    acts[static_cast<int64_t>(i)][0] = executed[i].op == PipeOp::kForward ? 0 : 1;
    acts[static_cast<int64_t>(i)][1] = executed[i].micro_batch;
    acts[static_cast<int64_t>(i)][2] = executed[i].chunk;
  }
  out.push_back(acts);
  push_by_name(whole, grads, out);
  push_by_name(whole, stage.state_dict(), out);
  train::testing::save_tensors("pp" + std::to_string(stage.stage()), out);
  return 0;
}
train::testing::DistScenario pipeline_lm_worker("pipeline_lm", pipeline_lm_scenario);

struct Reference {
  std::vector<double> losses;
  StateDict grads;   // of the first step
  StateDict params;  // after the last
  int64_t bytes = 0;
};

// The same model, batch and optimizer in one process, the loss the mean over the whole batch.
Reference reference(const DecoderConfig& c, int micro) {
  auto m = whole_model(c);
  torch::optim::SGD opt(m->parameters(), torch::optim::SGDOptions(kLr).momentum(kMomentum));
  auto [ids, target] = batch(c, micro);
  Reference r;
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    auto logits = m->forward(ids);
    auto loss = F::cross_entropy(logits.view({-1, c.vocab_size}), target.view({-1}),
                                 F::CrossEntropyFuncOptions().ignore_index(kIgnoreIndex));
    loss.backward();
    r.losses.push_back(loss.item<double>());
    if (step == 0)
      for (auto& p : m->named_parameters()) r.grads[p.key()] = p.value().grad().clone();
    opt.step();
  }
  for (auto& p : m->named_parameters()) {
    r.params[p.key()] = p.value().detach();
    r.bytes += p.value().numel() * 8;
  }
  return r;
}

std::vector<std::vector<torch::Tensor>> run_case(const Case& k) {
  auto dir = fs::temp_directory_path() / ("gpulab-pp-lm-" + std::to_string(::getpid()));
  const std::string spec = std::to_string(k.gpt2) + "," + std::to_string(k.pp) + "," +
                           std::to_string(k.virtual_stages) + "," + std::to_string(k.micro) + "," +
                           std::to_string(k.tied) + "," + std::to_string(k.wide);
  return train::testing::run_ranks_for_tensors("pipeline_lm", k.pp, dir, "pp",
                                               {{"GPULAB_PP_CASE", spec}});
}

// Each stage's tensors from position `first` on (one per ordinary name, empty where not held).
std::vector<StateDict> stage_dicts(const StateDict& names,
                                   const std::vector<std::vector<torch::Tensor>>& got,
                                   size_t first) {
  std::vector<StateDict> out(got.size());
  for (size_t s = 0; s < got.size(); ++s) {
    size_t i = first;
    for (const auto& [name, t] : names) {
      const auto& mine = got[s][i++];
      if (mine.numel() > 0) out[s][name] = mine;
    }
  }
  return out;
}

// Tolerance: a stage runs the one-process model's operations in the same order on its rows, so
// the forward values agree exactly row by row; what differs is the order of sums over the batch:
// the loss is M micro-batch sums added, each weight's gradient M micro-batch gradients
// accumulated (and a tied weight's two stage parts added), where one process sums all B·T
// positions in one reduction. Reordering n terms moves a sum by at most n·u·sum|terms| (u =
// 2^-53 = 1.1e-16): n = 64 positions and sum|terms| within ~10x of the largest element of these
// unit-scale tensors gives ~1e-13 relative to each tensor's largest element. SGD's step adds
// lr times the (momentum-averaged) gradient, so 5 steps carry that into the weights, and the
// forward passes of later steps see weights that differ by as little; 1e-12 bounds all of it.
constexpr double kTol = 1e-12;

double compare(const StateDict& got, const StateDict& want, const char* what) {
  double worst = 0;
  EXPECT_EQ(got.size(), want.size()) << what;
  for (const auto& [name, t] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << what << ": no stage holds " << name;
      continue;
    }
    const double d = train::testing::max_rel_diff(it->second, t);
    EXPECT_LT(d, kTol) << what << " " << name;
    worst = std::max(worst, d);
  }
  return worst;
}

std::vector<std::vector<PipeAction>> executed(const std::vector<std::vector<torch::Tensor>>& got) {
  std::vector<std::vector<PipeAction>> out;
  for (const auto& rank : got) {
    const auto& a = rank[2];
    out.emplace_back();
    for (int64_t i = 0; i < a.size(0); ++i)
      out.back().push_back({a[i][0].item<int64_t>() == 0 ? PipeOp::kForward : PipeOp::kBackward,
                            static_cast<int>(a[i][1].item<int64_t>()),
                            static_cast<int>(a[i][2].item<int64_t>())});
  }
  return out;
}

class PipelineLm : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineLm, FiveStepsMatchOneProcess) {
  const Case k = GetParam();
  const DecoderConfig c = tiny(k);
  const auto got = run_case(k);
  ASSERT_EQ(got.size(), static_cast<size_t>(k.pp));
  const Reference want = reference(c, k.micro);
  double worst = 0;
  for (const auto& rank : got)
    for (int step = 0; step < kSteps; ++step) {
      const double d =
          std::abs(rank[0][step].item<double>() - want.losses[step]) / std::abs(want.losses[step]);
      EXPECT_LT(d, kTol) << "loss of step " << step;
      worst = std::max(worst, d);
    }
  const StateDict names = want.params;
  const size_t first_grad = 3, first_param = first_grad + names.size();
  const auto grads = stage_dicts(names, got, first_grad);
  const auto params = stage_dicts(names, got, first_param);
  // gather_pipeline_state also checks that a tied weight is the same on both of its stages.
  worst = std::max(worst, compare(gather_pipeline_state(grads), want.grads, "gradient"));
  worst = std::max(worst, compare(gather_pipeline_state(params), want.params, "weight"));
  // Parameter memory: each rank about 1/P of the model (blocks dominate this shape).
  std::string bytes;
  for (const auto& rank : got) {
    const double share = rank[1][0].item<double>() / static_cast<double>(want.bytes);
    EXPECT_NEAR(share, 1.0 / k.pp, 0.1 / k.pp);
    bytes += (bytes.empty() ? "" : " / ") + std::to_string(rank[1][0].item<int64_t>());
  }
  const PipelineShape shape{k.pp, k.virtual_stages, k.micro};
  const Timeline slots = simulate_pipeline(shape, executed(got));
  EXPECT_FALSE(slots.deadlocked);
  EXPECT_NEAR(slots.idle_fraction(), ideal_bubble(shape), 0.1 * ideal_bubble(shape));
  std::string wall;
  for (const auto& rank : got) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.3f", wall.empty() ? "" : " / ",
                  rank[1][2].item<double>() / rank[1][1].item<double>());
    wall += buf;
  }
  std::printf(
      "PP %d%s %s%s (%s, M %d): loss %.15f (one process %.15f); largest relative difference over 5 "
      "losses, %zu gradients and %zu weights after 5 SGD steps %.3g; parameter bytes per rank "
      "%s of %lld; idle fraction: executed schedule's slots %.4f (formula (P-1)/(V·M+P-1) "
      "%.4f), wall time waiting per rank %s\n",
      k.pp,
      k.virtual_stages > 1 ? (" interleaved x" + std::to_string(k.virtual_stages)).c_str()
                           : " 1F1B",
      c.family.c_str(), k.wide ? " hidden 256" : "", k.tied ? "tied" : "untied", k.micro,
      got[0][0][0].item<double>(), want.losses[0], names.size(), names.size(), worst, bytes.c_str(),
      static_cast<long long>(want.bytes), slots.idle_fraction(), ideal_bubble(shape), wall.c_str());
}

INSTANTIATE_TEST_SUITE_P(Schedules, PipelineLm,
                         ::testing::Values(Case{false, 2, 1, 4, false}, Case{false, 2, 1, 4, true},
                                           Case{true, 2, 1, 4, true}, Case{false, 2, 2, 4, false},
                                           Case{true, 2, 2, 4, true},
                                           Case{false, 2, 1, 8, false, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return case_name(info.param);
                         });

}  // namespace
