// A pipeline stage: the family's model built in part, loaded from the ordinary weights.
#include "train/parallel/pipeline_stage.h"

#include "core/error.h"
#include "train/memory_stats.h"
#include "train/models/lm_families.h"

namespace gpulab::train::parallel {

namespace {

// The pieces of the model that stage `stage`'s chunks run.
ModelPart stage_part(const DecoderConfig& c, const PipelineShape& shape,
                     const std::vector<StageSpan>& spans, int stage) {
  ModelPart part;
  part.blocks.assign(static_cast<size_t>(c.num_layers), false);
  part.embedding = part.head = false;
  for (int chunk = stage; chunk < shape.chunks(); chunk += shape.stages) {
    const StageSpan& s = spans[static_cast<size_t>(chunk)];
    for (int64_t i = s.first_block; i < s.first_block + s.num_blocks; ++i)
      part.blocks[static_cast<size_t>(i)] = true;
    part.embedding = part.embedding || s.embedding;
    part.head = part.head || s.head;
  }
  return part;
}

torch::ScalarType floating_dtype(const StateDict& full) {
  for (const auto& [name, t] : full)
    if (t.is_floating_point()) return t.scalar_type();
  return torch::kFloat;
}

}  // namespace

PipelineStage::PipelineStage(const DecoderConfig& c, const PipelineShape& shape,
                             std::vector<StageSpan> spans, int stage, torch::Device device,
                             torch::ScalarType dtype)
    : PipelineStage(
          c, shape, std::move(spans), stage, dtype,
          [&c, device](const ModelPart& part) { return build_causal_lm(c, device, part); }, 1) {}

PipelineStage::PipelineStage(const DecoderConfig& c, const PipelineShape& shape,
                             std::vector<StageSpan> spans, int stage, torch::ScalarType dtype,
                             const std::function<CausalLmPtr(const ModelPart&)>& build,
                             int seq_parts)
    : shape_(shape), spans_(std::move(spans)), stage_(stage), dtype_(dtype), seq_parts_(seq_parts) {
  check_pipeline_shape(shape_);
  GPULAB_ASSERT(static_cast<int>(spans_.size()) == shape_.chunks() && stage >= 0 &&
                    stage < shape_.stages && seq_parts >= 1,
                "pipeline spans do not fit the shape");
  part_ = stage_part(c, shape_, spans_, stage);
  model_ = build(part_);
  model_->to(dtype_);
  // Tied weights over several stages: the first stage's input and the last stage's output.
  if (c.tie_word_embeddings && shape_.stages > 1 && (part_.embedding || part_.head))
    shared_ = std::string(c.traits().token_embedding);
}

PipelineStage::PipelineStage(const DecoderConfig& c, const PipelineShape& shape,
                             std::vector<StageSpan> spans, int stage, const StateDict& full,
                             torch::Device device)
    : PipelineStage(c, shape, std::move(spans), stage, device, floating_dtype(full)) {
  torch::NoGradGuard no_grad;
  for (auto& p : model_->named_parameters()) {
    if (p.value().is_meta()) continue;
    auto it = full.find(p.key());
    if (it == full.end() || it->second.sizes() != p.value().sizes())
      throw Exception(Code::kInvalidArgument,
                      "pipeline stage " + std::to_string(stage) + ": the weights have no " +
                          p.key() + " of the model's shape",
                      "give the stage the whole model's ordinary state dict");
    p.value().copy_(it->second);
  }
}

torch::Tensor PipelineStage::forward(int chunk, const torch::Tensor& input) {
  GPULAB_ASSERT(shape_.stage_of(chunk) == stage_, "a chunk of another stage");
  const StageSpan& s = span(chunk);
  torch::Tensor h = s.embedding ? model_->embed(input) : input;
  for (int64_t i = s.first_block; i < s.first_block + s.num_blocks; ++i) h = model_->block(i, h);
  return s.head ? model_->head(h) : h;
}

std::vector<torch::Tensor> PipelineStage::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& p : model_->named_parameters())
    if (!p.value().is_meta()) out.push_back(p.value());
  return out;
}

StateDict PipelineStage::state_dict() const {
  StateDict out;
  for (const auto& p : model_->named_parameters())
    if (!p.value().is_meta()) out[p.key()] = p.value().detach();
  return out;
}

int64_t PipelineStage::parameter_bytes() const {
  return held_parameter_bytes(*model_);
}

StateDict gather_pipeline_state(const std::vector<StateDict>& stages) {
  StateDict out;
  for (const auto& stage : stages)
    for (const auto& [name, t] : stage) {
      auto [it, added] = out.emplace(name, t);
      if (!added && !torch::equal(it->second, t))
        throw Exception(Code::kInvalidArgument,
                        "two pipeline stages hold different " + name + " (a tied weight)",
                        "sum the tied weight's gradient between the stages before each step");
    }
  return out;
}

}  // namespace gpulab::train::parallel
