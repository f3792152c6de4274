// Per-GPU memory of a decoder trained on a device mesh (TP x PP x DP, with a ZeRO stage over DP),
// from its shape alone: parameters, gradients and optimizer state by what each rank holds, and
// activations by Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
// Transformer Models"), with and without sequence parallelism and recomputation. Pure arithmetic
// (no libtorch), for the planner to search layouts with.
#pragma once

#include <cstdint>
#include <vector>

namespace gpulab::train::parallel {

struct DecoderShape {
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t ffn = 0;       // the MLP's inner width
  int64_t heads = 0;     // query heads
  int64_t kv_heads = 0;  // key/value heads (grouped-query attention); = heads without it
  int64_t vocab = 0;
  int64_t head_dim = 0;     // 0: hidden / heads
  bool gated_mlp = true;    // SwiGLU (gate, up, down: 3 matrices) or a plain MLP (2)
  bool biases = false;      // every linear layer has a bias (GPT-2)
  bool qkv_biases = false;  // only the query, key and value projections do (Qwen2)
  bool norm_bias = false;   // LayerNorm (scale and bias); false: RMSNorm (scale only)
  int64_t positions = 0;    // rows of a learned position table (GPT-2); 0: none (rotary)
  bool tied_embeddings = false;
  bool dropout = false;  // GPT-3's dropout masks (Korthikanti's model); gpulab trains without
};

enum class Recompute { kNone, kSelective, kFull };

// Whose activations: the paper's (Megatron-LM's: a fused norm keeps only its input, and sequence
// parallelism keeps a column-parallel product's 1/t input shard, gathering it again in the
// backward pass), or gpulab's (its RMSNorm also keeps the normalised input, and its sequence
// parallelism keeps the gathered product inputs whole; tests/train/parallel/tp_memory_test.cpp
// measures them).
enum class ActivationModel { kKorthikanti, kGpulab };

struct MeshMemoryQuery {
  DecoderShape model;
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int shard = 0;  // ZeRO stage over the DP group: 0 none, 1 optimizer, 2 + gradients, 3 + params
  int64_t seq_len = 2048;
  int64_t micro_batch = 1;    // sequences per micro-batch
  int64_t micro_batches = 1;  // per step (the 1F1B schedule keeps min(pp, this) in flight)
  bool sequence_parallel = true;
  Recompute recompute = Recompute::kNone;
  ActivationModel activation_model = ActivationModel::kKorthikanti;
  int64_t param_bytes = 2;  // bf16 weights
  int64_t grad_bytes = 2;
  int64_t optimizer_bytes = 12;  // per parameter: fp32 master copy + Adam's two moments
  int64_t activation_bytes = 2;  // the paper's formula counts 2-byte (16-bit) activations
};

struct MeshMemory {
  int stage = 0;               // the pipeline stage of the rank that holds the most
  int64_t stage_layers = 0;    // its decoder layers
  int64_t params_per_gpu = 0;  // elements this rank holds before any ZeRO-3 sharding
  int64_t params = 0;          // bytes
  int64_t grads = 0;
  int64_t optimizer = 0;
  int64_t activations = 0;
  int64_t total() const { return params + grads + optimizer + activations; }
};

// Elements of one decoder layer on one TP rank: the matrices and the column-parallel biases
// split, the norms and the row-parallel biases (added once, after the sum) whole on every rank.
int64_t layer_params(const DecoderShape& m, int tp);
// All elements of the model on one rank (TP 1, PP 1): the count Hugging Face reports.
int64_t model_params(const DecoderShape& m);
// Activation bytes of one layer for one micro-batch: Korthikanti's per-layer accounting for the
// block's shape (exactly the paper's formula for GPT: a 4h GELU MLP, as many kv heads as heads,
// dropout), scaled from its 2 bytes to activation_bytes.
int64_t layer_activation_bytes(const MeshMemoryQuery& q);
// Decoder layers per pipeline stage: the pipeline's own split (pipeline_split.h: training FLOPs
// per token at seq_len, the first stage also doing the embedding and the last the output layer
// and the loss, as Megatron-LM's --account-for-embedding-in-pipeline-split), so the planner
// reasons about the stages the run will have. Every stage keeps at least one layer (pp <= layers).
std::vector<int64_t> stage_layers(const DecoderShape& m, int pp, int64_t seq_len);
// The rank that holds the most: every stage's parameters (stage_layers) and its 1F1B activations
// (stage s keeps min(pp - s, micro_batches) micro-batches in flight), the largest total.
MeshMemory mesh_memory(const MeshMemoryQuery& q);

}  // namespace gpulab::train::parallel
