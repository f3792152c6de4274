// Runs a pipeline schedule (pipeline_schedule.h) on one stage: each forward receives its input
// activations from the previous chunk's stage and sends its output on; each backward receives
// the gradient of its output from the next chunk's stage and sends its input's gradient back;
// point to point over the pipeline group of the device mesh, asynchronous sends and blocking
// receives (a receive that never comes ends in the communicator's timeout, naming the stage it
// waited for). The last chunk computes the loss of each micro-batch; the step's loss is their sum,
// the mean over the whole batch, and every stage gets it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "train/dist/communicator.h"
#include "train/parallel/pipeline_stage.h"

namespace gpulab::train::parallel {

class TpCausalLm;

struct PipelineStepResult {
  double loss = 0;     // the batch's mean cross-entropy over targets that are not ignored
  double correct = 0;  // positions whose argmax is the target
  double wall_s = 0;   // this stage's step, from its first action to the loss broadcast
  double wait_s = 0;   // of which blocked: in receives, and in the closing loss broadcast
  std::vector<PipeAction> executed;  // the actions in the order this stage ran them
  double idle_fraction() const { return wall_s > 0 ? wait_s / wall_s : 0; }
};

// Held-out sums of one batch (every stage gets them): as the trainer's evaluation counts.
struct PipelineEvalSums {
  double loss_sum = 0;  // summed cross-entropy
  double top1 = 0, top5 = 0;
  double count = 0;  // positions
};

class PipelineExecutor {
 public:
  // `pp`: the pipeline group (its rank is the stage: DeviceMesh::pp()). The stage and the group
  // outlive the executor.
  PipelineExecutor(PipelineStage& stage, dist::Communicator& pp);

  // One step's forward and backward passes over the whole batch, tokens and targets B x T
  // (int64; targets kIgnoreIndex where no loss), cut into the shape's micro-batches along B (a
  // multiple of them; refused otherwise). Every stage passes the same batch (the first reads the
  // tokens, the last the targets). Gradients accumulate into the stage's parameters, complete
  // when it returns: a tied embedding's is summed between the first and the last stage.
  PipelineStepResult step(const torch::Tensor& tokens, const torch::Tensor& targets);
  // The forward passes alone, the whole batch at once through the chunks in model order (no
  // gradient): its evaluation sums, computed on the last stage.
  PipelineEvalSums evaluate(const torch::Tensor& tokens, const torch::Tensor& targets);

 private:
  void forward(const PipeAction& a, const std::vector<torch::Tensor>& tokens,
               const std::vector<torch::Tensor>& targets, double count);
  void backward(const PipeAction& a);
  torch::Tensor tp_loss(TpCausalLm& tp, const torch::Tensor& logits, const torch::Tensor& targets,
                        double count);
  // The activation (dir 0) or gradient (dir 1) crossing between chunks c and c+1.
  uint32_t tag(int micro_batch, int chunk, int dir) const;
  torch::Tensor receive(int from_stage, uint32_t tag, const std::string& what);
  void send(const torch::Tensor& t, int to_stage, uint32_t tag, const std::string& what);
  void sum_shared_gradient();
  void finish_sends();

  PipelineStage& stage_;
  dist::Communicator& pp_;
  std::vector<int64_t> hidden_shape_;  // a micro-batch's activations
  // This step's saved tensors, by (micro-batch, chunk): the chunk's input (with its gradient to
  // send back) and output, and the last chunk's loss.
  std::map<std::pair<int, int>, std::pair<torch::Tensor, torch::Tensor>> saved_;
  std::vector<std::pair<dist::WorkPtr, torch::Tensor>> sends_;  // in flight, with what they send
  std::map<uint32_t, torch::Tensor> local_;  // crossings within this stage (one stage)
  torch::Tensor loss_sum_, correct_;
  double wait_s_ = 0;
};

}  // namespace gpulab::train::parallel
