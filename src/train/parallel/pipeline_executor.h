// Runs a pipeline schedule (pipeline_schedule.h) on one stage: each forward receives its input
// activations from the previous chunk's stage and sends its output on; each backward receives
// the gradient of its output from the next chunk's stage and sends its input's gradient back;
// point to point over the pipeline group of the device mesh, asynchronous sends and blocking
// receives (a receive that never comes ends in the communicator's timeout, naming the stage it
// waited for). Each chunk's forward runs under the run's autocast (--precision bf16), as the
// one-process forward does. The last chunk computes the loss of each micro-batch (with the run's
// label smoothing); the step's loss is their sum, the mean over the whole batch, and every stage
// gets it. Under --grad_accum a step is one of several flushes whose gradients add up.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "train/dist/communicator.h"
#include "train/parallel/pipeline_stage.h"
#include "train/precision.h"

namespace gpulab::train::parallel {

class TpCausalLm;

struct PipelineStepResult {
  double loss = 0;     // the batch's mean cross-entropy over targets that are not ignored
  double correct = 0;  // positions whose argmax is the target
  double wall_s = 0;   // this stage's step, from its first action to the loss broadcast
  double wait_s = 0;   // of which blocked: in receives, and in the closing loss broadcast
  // Of wait_s, the waits the schedule forces on equal stages (the bubble): in the fill (the
  // actions up to the stage's first backward) and the drain (the backwards after its last
  // forward / backward pair, and the closing broadcast). The steady phase's waits (message
  // latency, unequal stages, a descheduled peer) are left out.
  double bubble_s = 0;
  double compute_s = 0;              // in the stage's actions, their receives left out
  std::vector<PipeAction> executed;  // the actions in the order this stage ran them
  double idle_fraction() const { return wall_s > 0 ? wait_s / wall_s : 0; }
  // The bubble over the bubble and this stage's compute: (P-1)/(V·M+P-1) on equal stages with
  // no latency (ideal_bubble, pipeline_timeline.h).
  double bubble_fraction() const {
    return bubble_s + compute_s > 0 ? bubble_s / (bubble_s + compute_s) : 0;
  }
};

// Held-out sums of one batch (every stage gets them): as the trainer's evaluation counts.
struct PipelineEvalSums {
  double loss_sum = 0;  // summed cross-entropy
  double top1 = 0, top5 = 0;
  double count = 0;  // positions
};

// How the stages compute: what the one-process step would (train/precision.h, --label_smoothing).
struct PipelineRunOptions {
  Precision precision = Precision::kFp32;  // autocast of the forward passes (bf16 or none)
  double label_smoothing = 0;
};

class PipelineExecutor {
 public:
  // `pp`: the pipeline group (its rank is the stage: DeviceMesh::pp()). The stage and the group
  // outlive the executor.
  PipelineExecutor(PipelineStage& stage, dist::Communicator& pp, PipelineRunOptions run = {});

  // One flush: the forward and backward passes over the whole batch, tokens and targets B x T
  // (int64; targets kIgnoreIndex where no loss), cut into the shape's micro-batches along B (a
  // multiple of them; refused otherwise). Every stage passes the same batch (the first reads the
  // tokens, the last the targets). Gradients accumulate into the stage's parameters, those of the
  // batch's mean loss over `group_size` (the flushes of one optimizer step, --grad_accum), and
  // are complete when the group's `last` flush returns: a tied embedding's is summed between the
  // first and the last stage then, once for the whole group. `loss_scale` (fp16's): the last
  // stage's backward runs on the loss times it, so every stage's gradients carry it.
  PipelineStepResult step(const torch::Tensor& tokens, const torch::Tensor& targets,
                          int64_t group_size = 1, bool last = true, double loss_scale = 1.0);
  // The forward passes alone, the whole batch at once through the chunks in model order (no
  // gradient): its evaluation sums, computed on the last stage.
  PipelineEvalSums evaluate(const torch::Tensor& tokens, const torch::Tensor& targets);

 private:
  void forward(const PipeAction& a, const std::vector<torch::Tensor>& tokens,
               const std::vector<torch::Tensor>& targets, double count, double group_size,
               double loss_scale);
  void backward(const PipeAction& a);
  torch::Tensor tp_loss(TpCausalLm& tp, const torch::Tensor& logits, const torch::Tensor& targets,
                        double count);
  // The activation (dir 0) or gradient (dir 1) crossing between chunks c and c+1.
  uint32_t tag(int micro_batch, int chunk, int dir) const;
  // The crossing action `a` receives: its chunk's input (a forward) or its output's gradient (a
  // backward), from `from` with `tag`; from -1 where it has none (an end of the pipeline).
  struct Incoming {
    int from = -1;
    uint32_t tag = 0;
    std::string what;
  };
  Incoming incoming(const PipeAction& a) const;
  torch::Tensor receive(int from_stage, uint32_t tag, const std::string& what);
  // Posts a receive from another stage into a fresh buffer (receive() waits for it).
  void post(int from_stage, uint32_t tag, const std::string& what);
  // Posts the receive action `a` will wait for (none within the stage or at the pipeline's
  // ends), so its bytes arrive while the action before it computes.
  void post_receive(const PipeAction& a);
  void send(const torch::Tensor& t, int to_stage, uint32_t tag, const std::string& what);
  void sum_shared_gradient();
  void finish_sends();

  PipelineStage& stage_;
  dist::Communicator& pp_;
  PipelineRunOptions run_;
  TpCausalLm* tp_;  // the stage's model under TP x PP (its loss is vocabulary-parallel), or null
  std::vector<int64_t> hidden_shape_;  // a micro-batch's activations
  // This step's saved tensors, by (micro-batch, chunk): the chunk's input (with its gradient to
  // send back) and output, and the last chunk's loss.
  std::map<std::pair<int, int>, std::pair<torch::Tensor, torch::Tensor>> saved_;
  std::vector<std::pair<dist::WorkPtr, torch::Tensor>> sends_;  // in flight, with what they send
  std::map<uint32_t, torch::Tensor> local_;  // crossings within this stage (one stage)
  std::map<uint32_t, std::pair<dist::WorkPtr, torch::Tensor>> posted_;  // receives, by tag
  torch::Tensor loss_sum_, correct_;
  double wait_s_ = 0;
};

}  // namespace gpulab::train::parallel
