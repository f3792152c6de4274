// How a Llama's weights split over tensor-parallel ranks (Megatron-LM's layout): the check that
// a TP size fits the shape, which dimension of each tensor is split, and the conversions between
// the ordinary (Hugging Face) state dict and one rank's shard, so checkpoints keep the ordinary
// layout whatever the TP size.
#pragma once

#include <string>
#include <vector>

#include "train/models/decoder_config.h"
#include "train/parallel/tp_group.h"
#include "train/parallel/tp_slices.h"
#include "train/weights/safetensors.h"

namespace gpulab::train::parallel {

// Throws gpulab::Exception (kInvalidArgument) when `tp` does not divide the query heads or the
// FFN width, or neither divides the other of `tp` and the key/value heads, naming the numbers
// and the largest TP size that works.
void check_tp_layout(const DecoderConfig& c, int tp);

// How many ranks hold each key/value head: 1 when TP divides the kv heads (they are split, as
// Megatron-LM does), tp / kv_heads when there are fewer kv heads than ranks: then each rank
// keeps the one kv head its query heads use (replicated over those ranks, whose gradients
// TpLlamaForCausalLM::finish_gradients sums).
int kv_replicas(const DecoderConfig& c, int tp);
bool tp_kv_rows(const std::string& name);  // k_proj or v_proj

// The dimension `name` is split along: 0 (rows: column-parallel q/k/v/gate/up, and the
// vocabulary of the embedding and the output layer), 1 (columns: row-parallel o/down), or -1
// (replicated: the norms).
int tp_split_dim(const std::string& name);
// Whether `name` has vocabulary rows (padded with zero rows to a multiple of TP when sharded).
bool tp_vocab_rows(const std::string& name);

// How rank `rank` of `tp` holds `name`, whose ordinary shape is `whole`: split tensors a range
// of rows or columns (the vocabulary padded with zero rows to a multiple of TP), a shared kv
// head its head's rows (first_copy on its first holder), replicated ones whole (on rank 0).
TpSlices llama_slices(const DecoderConfig& c, const std::string& name, c10::IntArrayRef whole,
                      int rank, int tp);

// Rank `rank`'s tensors of `full` (ordinary names and shapes), under the same names.
StateDict shard_state(const DecoderConfig& c, const StateDict& full, int rank, int tp);

// The ordinary state dict from every rank's shard, in rank order: split tensors concatenated and
// the vocabulary padding dropped; replicated ones are rank 0's (a replicated kv head's, its first
// holder's). Throws kInvalidArgument when the shards do not hold the same names.
StateDict gather_state(const DecoderConfig& c, const std::vector<StateDict>& shards);

// The same over the group (each split tensor all-gathered): every rank gets the ordinary state
// dict of the whole model, for rank 0 to write as a checkpoint. Every rank calls it together.
StateDict gather_state(const DecoderConfig& c, const StateDict& mine, TpGroup& group);

}  // namespace gpulab::train::parallel
