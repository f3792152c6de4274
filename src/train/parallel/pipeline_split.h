// How a decoder's blocks split over pipeline stages (no libtorch): each stage, or each model
// chunk of the interleaved schedule, gets a contiguous run of blocks; the first also does the
// embedding and the last the final norm, the output layer and the loss. The split minimises the
// costliest piece, since the slowest stage sets a pipeline's pace.
#pragma once

#include <cstdint>
#include <vector>

#include "formats/decoder_config.h"

namespace gpulab::train::parallel {

// Per-token cost of each piece, in any one unit (training FLOPs from decoder_stage_costs).
struct StageCosts {
  double embedding = 0;  // the token (and position) lookup and its gradient's scatter
  double block = 1;      // one decoder block
  double head = 0;       // the final norm, the output layer and the loss
};

// Training FLOPs per token (forward and backward) of `c`'s pieces at `seq_len`, counted as
// DecoderConfig::train_flops_per_token counts them (6 per weight of a product, 12·heads·head_dim·
// seq_len for a block's attention), so embedding + layers·block + head is that figure plus the
// lookup's 2·hidden (a row read forward, a row added backward). The loss's elementwise work (a few
// operations per vocabulary entry, under 1/hidden of the output layer's) is left out.
StageCosts decoder_stage_costs(const formats::DecoderConfig& c, int64_t seq_len);
// The same from the pieces' sizes (the planner's shapes): the hidden width, one block's matrix
// weights, its query heads x head size, and the vocabulary.
StageCosts decoder_stage_costs(int64_t hidden, int64_t block_matrix_parameters,
                               int64_t attention_width, int64_t vocab, int64_t seq_len);

// One model chunk: blocks [first_block, first_block + num_blocks).
struct StageSpan {
  int64_t first_block = 0;
  int64_t num_blocks = 0;
  bool embedding = false;  // chunk 0
  bool head = false;       // the last chunk
  double cost = 0;         // its blocks' and pieces' cost per token
};

// Throws gpulab::Exception (kInvalidArgument) when `pp` stages of `virtual_stages` chunks each
// need more chunks than the model has blocks (every chunk runs at least one), or a size is below
// 1, naming the numbers and the largest --pp that fits.
void check_pipeline_split(int64_t blocks, int pp, int virtual_stages = 1);

// The `blocks` blocks cut into pp·virtual_stages contiguous chunks in model order (chunk c runs on
// stage c % pp: the interleaved schedule's placement; with one virtual stage, chunk s is stage s),
// at least one block each, chosen to make the costliest chunk as cheap as possible (among equal
// ones, the earliest chunks take the most blocks). Checks as check_pipeline_split does.
std::vector<StageSpan> split_stages(int64_t blocks, int pp, int virtual_stages,
                                    const StageCosts& costs);

}  // namespace gpulab::train::parallel
