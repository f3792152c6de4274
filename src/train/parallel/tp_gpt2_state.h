// How a GPT-2's weights split over tensor-parallel ranks, and the conversions between its ordinary
// (Hugging Face GPT2LMHeadModel) state dict and one rank's shard. Conv1D keeps weights in x out,
// so a column-parallel layer splits dimension 1 and a row-parallel one dimension 0; the fused
// c_attn splits each of its q, k and v thirds, so a rank holds its heads' three.
#pragma once

#include <string>
#include <vector>

#include "train/models/decoder_config.h"
#include "train/parallel/tp_group.h"
#include "train/parallel/tp_slices.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

// How a tensor splits: along `dim` (-1: replicated: LayerNorms, the position table, the
// row-parallel layers' biases), each of `sections` equal parts of that dimension on its own
// (3 for c_attn's q, k and v), with the vocabulary padded to a multiple of TP (`vocab`).
struct Gpt2Split {
  int dim = -1;
  int sections = 1;
  bool vocab = false;
};
Gpt2Split gpt2_split(const std::string& name);

// How rank `rank` of `tp` holds `name` (ordinary shape `whole`): its part of each section of the
// split dimension (the vocabulary padded to a multiple of TP), or the whole tensor (on rank 0).
TpSlices gpt2_slices(const DecoderConfig& c, const std::string& name, c10::IntArrayRef whole,
                     int rank, int tp);

// Rank `rank`'s tensors of `full` (ordinary names and shapes), under the same names. Refuses a
// TP size the shape does not fit (check_tp_layout).
StateDict gpt2_shard_state(const DecoderConfig& c, const StateDict& full, int rank, int tp);

// The ordinary state dict from every rank's shard, in rank order (replicated tensors are rank
// 0's). Throws kInvalidArgument when the shards do not hold the same names.
StateDict gpt2_gather_state(const DecoderConfig& c, const std::vector<StateDict>& shards);

// The same over the group: every rank gets the ordinary state dict. Collective.
StateDict gpt2_gather_state(const DecoderConfig& c, const StateDict& mine, TpGroup& group);

}  // namespace gpulab::train::parallel
