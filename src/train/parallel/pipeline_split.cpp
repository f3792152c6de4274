// The pipeline's stage split: the cost model and the min-max partition of the blocks.
#include "train/parallel/pipeline_split.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"

namespace gpulab::train::parallel {

StageCosts decoder_stage_costs(const formats::DecoderConfig& c, int64_t seq_len) {
  return decoder_stage_costs(c.hidden_size, c.block_matrix_parameters(),
                             c.num_heads * c.dim_per_head(), c.vocab_size, seq_len);
}

StageCosts decoder_stage_costs(int64_t hidden, int64_t block_matrix_parameters,
                               int64_t attention_width, int64_t vocab, int64_t seq_len) {
  const auto d = static_cast<double>(hidden);
  StageCosts s;
  s.embedding = 2.0 * d;
  s.block = 6.0 * static_cast<double>(block_matrix_parameters) +
            12.0 * static_cast<double>(attention_width) * static_cast<double>(seq_len);
  // Tied or not, the output layer is a product with vocab x hidden weights.
  s.head = 6.0 * d * static_cast<double>(vocab);
  return s;
}

void check_pipeline_split(int64_t blocks, int pp, int virtual_stages) {
  if (pp < 1 || virtual_stages < 1)
    throw Exception(Code::kInvalidArgument,
                    "pipeline sizes must be at least 1 (--pp " + std::to_string(pp) + ", " +
                        std::to_string(virtual_stages) + " virtual stages)",
                    "use --pp 1 for no pipeline");
  const int64_t chunks = static_cast<int64_t>(pp) * virtual_stages;
  if (chunks <= blocks) return;
  const std::string what =
      virtual_stages == 1
          ? "--pp " + std::to_string(pp) + " needs " + std::to_string(pp) + " blocks"
          : "--pp " + std::to_string(pp) + " with " + std::to_string(virtual_stages) +
                " virtual stages each needs " + std::to_string(chunks) + " blocks";
  throw Exception(
      Code::kInvalidArgument,
      what + " (every stage runs at least one), but the model has " + std::to_string(blocks),
      "use --pp " + std::to_string(std::max<int64_t>(1, blocks / virtual_stages)) + " or fewer");
}

std::vector<StageSpan> split_stages(int64_t blocks, int pp, int virtual_stages,
                                    const StageCosts& costs) {
  check_pipeline_split(blocks, pp, virtual_stages);
  const int64_t k = static_cast<int64_t>(pp) * virtual_stages;
  const auto chunk_cost = [&](int64_t chunk, int64_t first, int64_t end) {
    return static_cast<double>(end - first) * costs.block + (chunk == 0 ? costs.embedding : 0) +
           (chunk == k - 1 ? costs.head : 0);
  };
  // best[c][j]: the least possible costliest chunk when chunks 0..c cover blocks [0, j);
  // cut[c][j]: where chunk c starts in that split. O(k·blocks²), a few thousand steps.
  const double inf = std::numeric_limits<double>::infinity();
  const auto n = static_cast<size_t>(blocks);
  std::vector<std::vector<double>> best(static_cast<size_t>(k), std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(static_cast<size_t>(k), std::vector<int64_t>(n + 1, 0));
  for (int64_t j = 1; j <= blocks; ++j) best[0][static_cast<size_t>(j)] = chunk_cost(0, 0, j);
  for (int64_t c = 1; c < k; ++c)
    for (int64_t j = c + 1; j <= blocks; ++j)
      // The latest start that reaches the minimum leaves the most blocks to earlier chunks.
      for (int64_t i = c; i < j; ++i) {
        const double worst =
            std::max(best[static_cast<size_t>(c - 1)][static_cast<size_t>(i)], chunk_cost(c, i, j));
        if (worst <= best[static_cast<size_t>(c)][static_cast<size_t>(j)]) {
          best[static_cast<size_t>(c)][static_cast<size_t>(j)] = worst;
          cut[static_cast<size_t>(c)][static_cast<size_t>(j)] = i;
        }
      }
  std::vector<StageSpan> spans(static_cast<size_t>(k));
  int64_t end = blocks;
  for (int64_t c = k - 1; c >= 0; --c) {
    const int64_t first = c == 0 ? 0 : cut[static_cast<size_t>(c)][static_cast<size_t>(end)];
    spans[static_cast<size_t>(c)] = {first, end - first, c == 0, c == k - 1,
                                     chunk_cost(c, first, end)};
    end = first;
  }
  return spans;
}

}  // namespace gpulab::train::parallel
