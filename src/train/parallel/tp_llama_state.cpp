// Sharding a Llama's state dict for TP and gathering it back (see tp_llama_state.h).
#include "train/parallel/tp_llama_state.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "core/error.h"
#include "train/parallel/tp_layers.h"

namespace gpulab::train::parallel {

namespace {

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool fits(const DecoderConfig& c, int tp) {
  const bool kv = c.num_kv_heads % tp == 0 || tp % c.num_kv_heads == 0;
  return c.num_heads % tp == 0 && kv && c.intermediate_size % tp == 0;
}

}  // namespace

void check_tp_layout(const DecoderConfig& c, int tp) {
  if (tp >= 1 && fits(c, tp)) return;
  int works = std::max(tp, 1);
  while (works > 1 && !fits(c, works)) --works;
  throw Exception(Code::kInvalidArgument,
                  "tensor-parallel size " + std::to_string(tp) + " does not fit " + c.name +
                      ": it must divide the " + std::to_string(c.num_heads) +
                      " query heads and the FFN width " + std::to_string(c.intermediate_size) +
                      ", and divide or be a multiple of the " + std::to_string(c.num_kv_heads) +
                      " key/value heads (a rank holds whole kv heads, or one shared with others)",
                  "use --tp " + std::to_string(works) + " (the largest size up to " +
                      std::to_string(tp) + " that fits)");
}

int kv_replicas(const DecoderConfig& c, int tp) {
  return c.num_kv_heads < tp ? tp / static_cast<int>(c.num_kv_heads) : 1;
}

bool tp_kv_rows(const std::string& name) {
  return ends_with(name, "k_proj.weight") || ends_with(name, "v_proj.weight") ||
         ends_with(name, "k_proj.bias") || ends_with(name, "v_proj.bias");
}

int tp_split_dim(const std::string& name) {
  // Qwen2's q/k/v biases: one value per output row, split with the rows.
  static constexpr std::array<std::string_view, 10> rows{
      "embed_tokens.weight", "lm_head.weight", "q_proj.weight", "k_proj.weight",
      "v_proj.weight",       "q_proj.bias",    "k_proj.bias",   "v_proj.bias",
      "gate_proj.weight",    "up_proj.weight"};
  static constexpr std::array<std::string_view, 2> cols{"o_proj.weight", "down_proj.weight"};
  for (auto tail : rows)
    if (ends_with(name, tail)) return 0;
  for (auto tail : cols)
    if (ends_with(name, tail)) return 1;
  return -1;
}

bool tp_vocab_rows(const std::string& name) {
  return ends_with(name, "embed_tokens.weight") || ends_with(name, "lm_head.weight");
}

TpSlices llama_slices(const DecoderConfig& c, const std::string& name, c10::IntArrayRef whole,
                      int rank, int tp) {
  TpSlices s;
  const int dim = tp_split_dim(name);
  if (dim < 0) {
    s.first_copy = rank == 0;
    return s;
  }
  s.dim = dim;
  const int64_t n = whole[static_cast<size_t>(dim)];
  if (tp_kv_rows(name) && kv_replicas(c, tp) > 1) {  // the one kv head this rank's queries use
    const int replicas = kv_replicas(c, tp);
    const int64_t per = n / c.num_kv_heads;
    s.local_size = per;
    s.runs = {{0, rank / replicas * per, per}};
    s.first_copy = rank % replicas == 0;
    return s;
  }
  const int64_t per = (tp_vocab_rows(name) ? padded_to(n, tp) : n) / tp;
  s.local_size = per;
  const int64_t start = rank * per, length = std::min(per, n - start);
  if (length > 0) s.runs = {{0, start, length}};
  return s;
}

StateDict shard_state(const DecoderConfig& c, const StateDict& full, int rank, int tp) {
  check_tp_layout(c, tp);
  StateDict out;
  for (const auto& [name, t] : full)
    out[name] = shard_by_slices(t, llama_slices(c, name, t.sizes(), rank, tp));
  return out;
}

StateDict gather_state(const DecoderConfig& c, const std::vector<StateDict>& shards) {
  GPULAB_ASSERT(!shards.empty(), "gather_state: no shards");
  StateDict out;
  for (const auto& [name, first] : shards[0]) {
    std::vector<torch::Tensor> parts;
    const size_t step =
        tp_kv_rows(name) ? static_cast<size_t>(kv_replicas(c, static_cast<int>(shards.size()))) : 1;
    for (size_t r = 0; r < shards.size(); ++r) {
      auto it = shards[r].find(name);
      if (it == shards[r].end() || shards[r].size() != shards[0].size())
        throw Exception(Code::kInvalidArgument,
                        "tensor-parallel shard " + std::to_string(r) + " does not hold the " +
                            "tensors of shard 0 (" + name + ")",
                        "gather the shards of one checkpoint, all of its ranks");
      // A replicated kv head's copies are equal: each head comes from its first holder.
      if (r % step == 0) parts.push_back(it->second);
    }
    const int dim = tp_split_dim(name);
    if (dim < 0) {
      out[name] = first.clone();
      continue;
    }
    auto whole = torch::cat(parts, dim);
    out[name] = tp_vocab_rows(name) ? whole.narrow(0, 0, c.vocab_size).clone() : whole;
  }
  return out;
}

StateDict gather_state(const DecoderConfig& c, const StateDict& mine, TpGroup& group) {
  std::vector<StateDict> shards(static_cast<size_t>(group.size()));
  for (const auto& [name, t] : mine) {
    if (tp_split_dim(name) < 0) {
      for (auto& s : shards) s[name] = t;
      continue;
    }
    const auto per = all_shards_of(t, group, "gather of a TP checkpoint");
    for (size_t r = 0; r < shards.size(); ++r) shards[r][name] = per[r];
  }
  return gather_state(c, shards);
}

}  // namespace gpulab::train::parallel
