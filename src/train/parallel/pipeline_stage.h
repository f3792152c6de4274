// One pipeline stage of a language model: the ordinary model of its family (build_causal_lm)
// with only this stage's pieces on the device (its blocks, and the embedding on the first stage,
// the final norm and output layer on the last; the rest are shapes on the meta device), its
// weights taken from the ordinary state dict under their ordinary names, so a stage starts from
// exactly the one-process model and its state dict is a slice of the ordinary one. With virtual
// stages a stage holds several model chunks (chunk c on stage c % P).
#pragma once

#include <torch/torch.h>
#include <functional>

#include <string>
#include <vector>

#include "train/models/causal_lm.h"
#include "train/parallel/pipeline_schedule.h"
#include "train/parallel/pipeline_split.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

class PipelineStage {
 public:
  // Stage `stage` of `shape`, its chunks cut by `spans` (split_stages, one per model chunk), from
  // `full` (the ordinary state dict; the stage takes its floating dtype). Throws
  // kInvalidArgument when `full` lacks one of the stage's tensors or has the wrong shape.
  PipelineStage(const DecoderConfig& c, const PipelineShape& shape, std::vector<StageSpan> spans,
                int stage, const StateDict& full, torch::Device device = torch::kCPU);
  // The same stage initialised as build_causal_lm initialises the whole model (the same values
  // for the same generator state: CausalLm::init_normal), in `dtype`, without ever holding more
  // than the stage's pieces and the largest one of the rest.
  PipelineStage(const DecoderConfig& c, const PipelineShape& shape, std::vector<StageSpan> spans,
                int stage, torch::Device device, torch::ScalarType dtype);
  // Tensor parallelism inside the stage (TP x PP): the family's tensor-parallel model of this
  // stage's part, as `build` makes it from the part (build_tp_causal_lm, a tensor at a time: the
  // stage is never held whole), runs the chunks, in `dtype`. Its crossings carry 1/seq_parts of
  // the positions: with sequence parallelism each TP rank sends its own shard of the sequence to
  // the same TP rank of the next stage (no gather before a send, no scatter after a receive, 1/TP
  // of the bytes per rank), and without it each sends its whole copy.
  PipelineStage(const DecoderConfig& c, const PipelineShape& shape, std::vector<StageSpan> spans,
                int stage, torch::ScalarType dtype,
                const std::function<CausalLmPtr(const ModelPart&)>& build, int seq_parts);

  int stage() const { return stage_; }
  const PipelineShape& shape() const { return shape_; }
  const StageSpan& span(int chunk) const { return spans_[static_cast<size_t>(chunk)]; }
  const DecoderConfig& config() const { return model_->config(); }
  torch::ScalarType dtype() const { return dtype_; }
  CausalLm& model() { return *model_; }
  const CausalLmPtr& model_ptr() const { return model_; }
  const ModelPart& part() const { return part_; }  // the pieces this stage's chunks run

  // The positions of one crossing's activations for sequences of `seq_len`.
  int64_t crossing_positions(int64_t seq_len) const { return seq_len / seq_parts_; }

  // Chunk `chunk` (one of this stage's) on `input`: tokens (B x T) for the first chunk, hidden
  // states (B x T x hidden) otherwise; returns hidden states, or the logits from the last chunk.
  torch::Tensor forward(int chunk, const torch::Tensor& input);

  // This stage's own parameters (what it materialised), for its optimizer; by ordinary name.
  std::vector<torch::Tensor> parameters() const;
  StateDict state_dict() const;  // detached, sharing storage with the parameters
  int64_t parameter_bytes() const;
  // The tied embedding / output weight's name when this stage holds it and another stage does
  // too (the first and the last of several): their gradients must be summed. Empty otherwise.
  const std::string& shared_weight() const { return shared_; }

 private:
  PipelineShape shape_;
  std::vector<StageSpan> spans_;
  int stage_;
  torch::ScalarType dtype_ = torch::kFloat;
  CausalLmPtr model_;
  ModelPart part_;
  int seq_parts_ = 1;
  std::string shared_;
};

// The ordinary state dict from every stage's (in any order): their union. A name two stages hold
// (the tied embedding) must be equal on both. Throws kInvalidArgument when they differ.
StateDict gather_pipeline_state(const std::vector<StateDict>& stages);

}  // namespace gpulab::train::parallel
