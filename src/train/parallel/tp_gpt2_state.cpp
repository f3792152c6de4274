// Sharding a GPT-2's state dict for TP and gathering it back (see tp_gpt2_state.h).
#include "train/parallel/tp_gpt2_state.h"

#include <algorithm>
#include <string_view>

#include "core/error.h"
#include "train/parallel/tp_layers.h"
#include "train/parallel/tp_llama_state.h"

namespace gpulab::train::parallel {

namespace {

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

Gpt2Split gpt2_split(const std::string& name) {
  if (ends_with(name, "wte.weight") || ends_with(name, "lm_head.weight")) return {0, 1, true};
  // Column-parallel: Conv1D's output columns, and their biases.
  if (ends_with(name, "attn.c_attn.weight")) return {1, 3, false};
  if (ends_with(name, "attn.c_attn.bias")) return {0, 3, false};
  if (ends_with(name, "mlp.c_fc.weight")) return {1, 1, false};
  if (ends_with(name, "mlp.c_fc.bias")) return {0, 1, false};
  // Row-parallel: Conv1D's input rows; the bias is added once, after the sum.
  if (ends_with(name, "c_proj.weight")) return {0, 1, false};
  return {};
}

TpSlices gpt2_slices(const DecoderConfig& /*c*/, const std::string& name, c10::IntArrayRef whole,
                     int rank, int tp) {
  const Gpt2Split split = gpt2_split(name);
  TpSlices s;
  if (split.dim < 0) {
    s.first_copy = rank == 0;
    return s;
  }
  s.dim = split.dim;
  const int64_t n = whole[static_cast<size_t>(split.dim)];
  const int64_t section = (split.vocab ? padded_to(n, tp) : n) / split.sections;
  const int64_t per = section / tp;
  s.local_size = per * split.sections;
  for (int k = 0; k < split.sections; ++k) {
    const int64_t start = k * section + rank * per, length = std::min(per, n - start);
    if (length > 0) s.runs.push_back({k * per, start, length});
  }
  return s;
}

StateDict gpt2_shard_state(const DecoderConfig& c, const StateDict& full, int rank, int tp) {
  check_tp_layout(c, tp);
  StateDict out;
  for (const auto& [name, t] : full)
    out[name] = shard_by_slices(t, gpt2_slices(c, name, t.sizes(), rank, tp));
  return out;
}

StateDict gpt2_gather_state(const DecoderConfig& c, const std::vector<StateDict>& shards) {
  GPULAB_ASSERT(!shards.empty(), "gpt2_gather_state: no shards");
  StateDict out;
  for (const auto& [name, first] : shards[0]) {
    const Gpt2Split s = gpt2_split(name);
    std::vector<std::vector<torch::Tensor>> sections(static_cast<size_t>(s.sections));
    for (size_t r = 0; r < shards.size(); ++r) {
      auto it = shards[r].find(name);
      if (it == shards[r].end() || shards[r].size() != shards[0].size())
        throw Exception(Code::kInvalidArgument,
                        "tensor-parallel shard " + std::to_string(r) +
                            " does not hold the tensors of shard 0 (" + name + ")",
                        "gather the shards of one checkpoint, all of its ranks");
      if (s.dim < 0) continue;
      const auto pieces = it->second.chunk(s.sections, s.dim);
      for (size_t k = 0; k < sections.size(); ++k) sections[k].push_back(pieces[k]);
    }
    if (s.dim < 0) {
      out[name] = first.clone();
      continue;
    }
    std::vector<torch::Tensor> whole;
    for (const auto& parts : sections) whole.push_back(torch::cat(parts, s.dim));
    auto joined = torch::cat(whole, s.dim);
    out[name] = s.vocab ? joined.narrow(0, 0, c.vocab_size).clone() : joined;
  }
  return out;
}

StateDict gpt2_gather_state(const DecoderConfig& c, const StateDict& mine, TpGroup& group) {
  std::vector<StateDict> shards(static_cast<size_t>(group.size()));
  for (const auto& [name, t] : mine) {
    if (gpt2_split(name).dim < 0) {
      for (auto& s : shards) s[name] = t;
      continue;
    }
    const auto per = all_shards_of(t, group, "gather of a TP checkpoint");
    for (size_t r = 0; r < shards.size(); ++r) shards[r][name] = per[r];
  }
  return gpt2_gather_state(c, shards);
}

}  // namespace gpulab::train::parallel
