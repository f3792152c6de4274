// The pipeline executor: a stage's actions with their point-to-point crossings.
#include "train/parallel/pipeline_executor.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/parallel/tp_causal_lm.h"
#include "train/parallel/vocab_parallel_cross_entropy.h"

namespace gpulab::train::parallel {

namespace {

namespace F = torch::nn::functional;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string micro_text(int m) {
  return "micro-batch " + std::to_string(m);
}

// A stage's schedule is warm-up forwards, forward / backward pairs, cool-down backwards: the fill
// ends with its first backward (index returned first), the drain starts after the backward of
// its last pair (index returned second).
std::pair<size_t, size_t> bubble_phases(const std::vector<PipeAction>& actions) {
  size_t first_backward = actions.size(), last_forward = 0;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (actions[i].op == PipeOp::kBackward && first_backward == actions.size()) first_backward = i;
    if (actions[i].op == PipeOp::kForward) last_forward = i;
  }
  return {first_backward, last_forward + 2};
}

}  // namespace

PipelineExecutor::PipelineExecutor(PipelineStage& stage, dist::Communicator& pp,
                                   PipelineRunOptions run)
    : stage_(stage), pp_(pp), run_(run), tp_(dynamic_cast<TpCausalLm*>(&stage.model())) {
  GPULAB_ASSERT(pp.size() == stage.shape().stages && pp.rank() == stage.stage(),
                "the pipeline group is not the stage's");
}

uint32_t PipelineExecutor::tag(int micro_batch, int chunk, int dir) const {
  return static_cast<uint32_t>((micro_batch * stage_.shape().chunks() + chunk) * 2 + dir);
}

PipelineExecutor::Incoming PipelineExecutor::incoming(const PipeAction& a) const {
  const PipelineShape& s = stage_.shape();
  const StageSpan& span = stage_.span(a.chunk);
  const std::string m = "receiving " + micro_text(a.micro_batch);
  if (a.op == PipeOp::kForward)
    return span.embedding ? Incoming{}
                          : Incoming{s.stage_of(a.chunk - 1), tag(a.micro_batch, a.chunk - 1, 0),
                                     m + "'s activations"};
  return span.head ? Incoming{}
                   : Incoming{s.stage_of(a.chunk + 1), tag(a.micro_batch, a.chunk, 1),
                              m + "'s activation gradient"};
}

torch::Tensor PipelineExecutor::receive(int from_stage, uint32_t t, const std::string& what) {
  if (from_stage == stage_.stage()) {
    auto it = local_.find(t);
    GPULAB_ASSERT(it != local_.end(), "a crossing within the stage arrived out of order");
    auto out = it->second;
    local_.erase(it);
    return out;
  }
  if (!posted_.count(t)) post(from_stage, t, what);
  auto it = posted_.find(t);
  auto [work, buf] = std::move(it->second);
  posted_.erase(it);
  const auto start = Clock::now();
  pp_.wait(work, what + " from pipeline stage " + std::to_string(from_stage));
  wait_s_ += seconds_since(start);
  return buf;
}

void PipelineExecutor::post(int from_stage, uint32_t t, const std::string& what) {
  auto buf = torch::empty(hidden_shape_,
                          torch::TensorOptions().dtype(stage_.dtype()).device(pp_.device()));
  auto work = pp_.recv_async(buf, from_stage, t,
                             what + " from pipeline stage " + std::to_string(from_stage));
  posted_.emplace(t, std::make_pair(std::move(work), buf));
}

void PipelineExecutor::post_receive(const PipeAction& a) {
  const Incoming in = incoming(a);
  if (in.from < 0 || in.from == stage_.stage() || posted_.count(in.tag)) return;
  post(in.from, in.tag, in.what);
}

void PipelineExecutor::send(const torch::Tensor& t, int to_stage, uint32_t tg,
                            const std::string& what) {
  if (to_stage == stage_.stage()) {
    local_[tg] = t;
    return;
  }
  // Autocast may leave a chunk's output in its product dtype; the crossing is in the stage's.
  auto out = t.to(pp_.device(), stage_.dtype()).contiguous();
  sends_.emplace_back(
      pp_.send_async(out, to_stage, tg, what + " to pipeline stage " + std::to_string(to_stage)),
      out);
}

void PipelineExecutor::forward(const PipeAction& a, const std::vector<torch::Tensor>& tokens,
                               const std::vector<torch::Tensor>& targets, double count,
                               double group_size, double loss_scale) {
  const PipelineShape& s = stage_.shape();
  const StageSpan& span = stage_.span(a.chunk);
  const auto mb = static_cast<size_t>(a.micro_batch);
  torch::Tensor input;
  if (span.embedding) {
    input = tokens[mb];
  } else {
    const Incoming in = incoming(a);
    input = receive(in.from, in.tag, in.what).to(tokens[mb].device()).requires_grad_(true);
  }
  torch::Tensor out;
  {
    AutocastGuard autocast(run_.precision, input.device());
    out = stage_.forward(a.chunk, input);
  }
  if (span.head) {
    // This micro-batch's share of the batch mean: its summed loss over the batch's count, taken
    // in the stage's dtype outside autocast as the one-process loss is (bf16 logits rounded the
    // loss and its softmax's gradient: 5.625 printed for 5.6029); backward runs on its share of
    // the optimizer step's mean over the group's flushes.
    const auto logits = out.to(stage_.dtype());
    if (tp_ != nullptr) {
      out = tp_loss(*tp_, logits, targets[mb], count);
    } else {
      const int64_t vocab = logits.size(-1);
      const auto hits = logits.detach().argmax(-1).eq(targets[mb]).sum().to(torch::kDouble);
      correct_ = correct_.defined() ? correct_ + hits : hits;
      out = F::cross_entropy(logits.reshape({-1, vocab}), targets[mb].reshape({-1}),
                             F::CrossEntropyFuncOptions()
                                 .ignore_index(kIgnoreIndex)
                                 .reduction(torch::kSum)
                                 .label_smoothing(run_.label_smoothing)) /
            count;
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + out.detach() : out.detach();
    }
  } else {
    send(out.detach(), s.stage_of(a.chunk + 1), tag(a.micro_batch, a.chunk, 0),
         "sending " + micro_text(a.micro_batch) + "'s activations");
  }
  if (span.head && group_size > 1) out = out / group_size;
  if (span.head && loss_scale != 1.0) out = out * loss_scale;
  saved_[{a.micro_batch, a.chunk}] = {input, out};
}

// A tensor-parallel last stage's logits are its vocabulary columns: the vocabulary-parallel loss
// (its mean over the micro-batch's targets, made this micro-batch's share of the batch mean) and
// argmax, both reduced over the TP group.
torch::Tensor PipelineExecutor::tp_loss(TpCausalLm& tp, const torch::Tensor& logits,
                                        const torch::Tensor& targets, double count) {
  auto [mean, hits] = tp.loss_of(logits, targets);
  // Counted on the device: no host sync per micro-batch.
  const auto valid = (targets != kIgnoreIndex).sum().clamp_min(1).to(mean.scalar_type());
  const auto h = hits.to(torch::kDouble);
  correct_ = correct_.defined() ? correct_ + h : h;
  auto out = mean * valid / count;
  loss_sum_ = loss_sum_.defined() ? loss_sum_ + out.detach() : out.detach();
  return out;
}

void PipelineExecutor::backward(const PipeAction& a) {
  const PipelineShape& s = stage_.shape();
  const StageSpan& span = stage_.span(a.chunk);
  auto it = saved_.find({a.micro_batch, a.chunk});
  GPULAB_ASSERT(it != saved_.end(), "a backward before its forward");
  auto [input, out] = it->second;
  saved_.erase(it);
  if (span.head) {
    out.backward();
  } else {
    const Incoming in = incoming(a);
    auto grad = receive(in.from, in.tag, in.what).to(out.device());
    torch::autograd::backward({out}, {grad});
  }
  if (!span.embedding)
    send(input.grad(), s.stage_of(a.chunk - 1), tag(a.micro_batch, a.chunk - 1, 1),
         "sending " + micro_text(a.micro_batch) + "'s activation gradient");
}

void PipelineExecutor::finish_sends() {
  for (auto& [work, t] : sends_) pp_.wait(work, "a pipeline send");
  sends_.clear();
}

// Megatron-LM's embedding group: the first stage's lookup and the last stage's output layer use
// one tied weight; each holds a copy with its own part of the gradient, so both add the other's
// (a + b on one, b + a on the other: the same bits) and their optimizer steps stay identical.
void PipelineExecutor::sum_shared_gradient() {
  const std::string& name = stage_.shared_weight();
  if (name.empty()) return;
  const int last = stage_.shape().stages - 1;
  const int other = stage_.stage() == 0 ? last : 0;
  torch::Tensor grad;
  for (const auto& p : stage_.model().named_parameters())
    if (p.key() == name) grad = p.value().grad();
  GPULAB_ASSERT(grad.defined(), "the tied weight has no gradient");
  auto mine = grad.to(pp_.device()).contiguous();
  auto theirs = torch::empty_like(mine);
  const auto t = static_cast<uint32_t>(2 * stage_.shape().micro_batches * stage_.shape().chunks());
  const std::string peer =
      " the tied embedding's gradient with pipeline stage " + std::to_string(other);
  auto recv = pp_.recv_async(theirs, other, t, "receiving" + peer);
  auto sent = pp_.send_async(mine, other, t, "sending" + peer);
  pp_.wait(recv, "receiving" + peer);
  pp_.wait(sent, "sending" + peer);
  torch::NoGradGuard no_grad;
  grad.add_(theirs.to(grad.device()));
}

PipelineStepResult PipelineExecutor::step(const torch::Tensor& tokens, const torch::Tensor& targets,
                                          int64_t group_size, bool last, double loss_scale) {
  const PipelineShape& s = stage_.shape();
  const int64_t b = tokens.size(0), m = s.micro_batches;
  if (b % m != 0)
    throw Exception(Code::kInvalidArgument,
                    "a batch of " + std::to_string(b) + " rows does not split into " +
                        std::to_string(m) + " micro-batches",
                    "use a batch size that is a multiple of the micro-batches");
  hidden_shape_ = {b / m, stage_.crossing_positions(tokens.size(1)), stage_.config().hidden_size};
  const auto micro_tokens = tokens.chunk(m, 0), micro_targets = targets.chunk(m, 0);
  const double count = std::max<double>(1.0, (targets != kIgnoreIndex).sum().item<double>());
  PipelineStepResult r;
  wait_s_ = 0;
  loss_sum_ = correct_ = torch::Tensor();
  const auto actions = pipeline_schedule(s, stage_.stage());
  const auto [fill_end, drain_start] = bubble_phases(actions);
  const auto start = Clock::now();
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipeAction& a = actions[i];
    // The next action's crossing is posted before this one runs: its bytes arrive meanwhile
    // (posted when needed, a receive waited out the sender's transfer after it asked).
    if (i + 1 < actions.size()) post_receive(actions[i + 1]);
    const double waited = wait_s_;
    const auto t = Clock::now();
    if (a.op == PipeOp::kForward)
      forward(a, micro_tokens, micro_targets, count, static_cast<double>(group_size), loss_scale);
    else
      backward(a);
    r.compute_s += seconds_since(t) - (wait_s_ - waited);
    if (i <= fill_end || i >= drain_start) r.bubble_s += wait_s_ - waited;
    r.executed.push_back(a);
  }
  finish_sends();
  // Every stage gets the last stage's loss; the wait here is the end of this stage's bubble.
  auto loss = s.stages - 1 == stage_.stage()
                  ? torch::stack({loss_sum_.to(torch::kDouble), correct_}).cpu().to(pp_.device())
                  : torch::zeros({2}, torch::TensorOptions().dtype(torch::kDouble));
  const auto before = Clock::now();
  pp_.broadcast(loss, s.stages - 1, "the pipeline's loss");
  wait_s_ += seconds_since(before);
  r.bubble_s += seconds_since(before);
  r.wall_s = seconds_since(start);
  // Each stage's copy holds its own part of the whole group's gradient by now.
  if (last) sum_shared_gradient();
  r.loss = loss[0].item<double>();
  r.correct = loss[1].item<double>();
  r.wait_s = wait_s_;
  return r;
}

PipelineEvalSums PipelineExecutor::evaluate(const torch::Tensor& tokens,
                                            const torch::Tensor& targets) {
  torch::NoGradGuard no_grad;
  const PipelineShape& s = stage_.shape();
  hidden_shape_ = {tokens.size(0), stage_.crossing_positions(tokens.size(1)),
                   stage_.config().hidden_size};
  const uint32_t base = tag(s.micro_batches, 0, 0);  // past every training tag
  auto sums = torch::zeros({4}, torch::kDouble);
  for (int chunk = 0; chunk < s.chunks(); ++chunk) {
    if (s.stage_of(chunk) != stage_.stage()) continue;
    const StageSpan& span = stage_.span(chunk);
    torch::Tensor h = span.embedding
                          ? tokens
                          : receive(s.stage_of(chunk - 1), base + static_cast<uint32_t>(chunk - 1),
                                    "receiving an evaluation batch's activations")
                                .to(tokens.device());
    {
      AutocastGuard autocast(run_.precision, tokens.device());
      h = stage_.forward(chunk, h);
    }
    if (!span.head) {
      send(h, s.stage_of(chunk + 1), base + static_cast<uint32_t>(chunk),
           "sending an evaluation batch's activations");
      continue;
    }
    const auto logits = h.reshape({-1, h.size(-1)}).to(stage_.dtype());
    const auto y = targets.reshape({-1});
    const auto hits =
        std::get<1>(logits.topk(std::min<int64_t>(5, logits.size(1)), 1)).eq(y.unsqueeze(1));
    sums[0] = F::cross_entropy(logits, y, F::CrossEntropyFuncOptions().reduction(torch::kSum))
                  .item<double>();
    sums[1] = hits.select(1, 0).sum().item<double>();
    sums[2] = hits.any(1).sum().item<double>();
    sums[3] = static_cast<double>(y.size(0));
  }
  finish_sends();
  auto shared = sums.to(pp_.device());
  pp_.broadcast(shared, s.stages - 1, "the pipeline's evaluation sums");
  shared = shared.cpu();
  return {shared[0].item<double>(), shared[1].item<double>(), shared[2].item<double>(),
          shared[3].item<double>()};
}

}  // namespace gpulab::train::parallel
