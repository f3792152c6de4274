// The keys and values a decoder keeps between generation steps, and what a batch of rows of
// different lengths needs beside them: which positions of each row hold a token (left padding),
// each row's positions, the mask attention applies. Rows can be repeated (a prompt's prefix
// shared by its group) and dropped (finished rows leave the batch).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace gpulab::train {

// Keys and values of every layer for the positions seen so far, for generation.
struct KvCache {
  std::vector<torch::Tensor> keys, values;  // per layer: B x kv_heads x length x head_dim
  int64_t length = 0;
  // Positions to hold room for (a generation's prompt + new tokens): keys and values then live
  // in buffers that long and each step writes its position in place; without it (0), each step
  // concatenates, copying the whole cache (most of a decode step at a few hundred positions).
  int64_t reserve = 0;
  // Rows of different lengths (left-padded prompts): which positions of each row hold a token,
  // B x columns bool. Set before the first forward pass to cover its tokens; later tokens are
  // real (begin_step appends them). Undefined: every row holds every position.
  torch::Tensor present;
  // This forward pass's attention mask, B x 1 x T x (length + T) bool (begin_step): a row's
  // queries see its own earlier tokens, never padding. Undefined without `present`.
  torch::Tensor attend;
  // Generation reads the last position's logits only: the forward pass then applies the output
  // head to that position alone (B x 1 x vocab), not to every prompt position.
  bool last_logits_only = false;
};

// Begins a forward pass of `t` new tokens per row: the positions they take, [t] (every row alike,
// from cache.length) or, with cache.present, [B, t] (each row counts only its real tokens, as
// if it were alone), and, with cache.present, cache.attend.
torch::Tensor begin_step(KvCache& cache, int64_t batch, int64_t t, torch::Device device);

// `held` (B x kv_heads x L x D, or undefined) with `fresh` (B x kv_heads x T x D) after its
// positions: written in place where held is a view of a buffer with room behind it, else copied
// into a new buffer of `reserve` positions (a quarter more than L + T when that is short). Reserve
// 0, or autograd recording: a plain concatenation. Returns the B x kv_heads x (L + T) x D view.
torch::Tensor append_positions(const torch::Tensor& held, const torch::Tensor& fresh,
                               int64_t reserve);

// Each row `times` times in a row (row r becomes rows r * times .. r * times + times - 1). Both row
// operations copy each layer once, into a buffer with the cache's reserve behind its positions.
void repeat_rows(KvCache& cache, int64_t times);

// Keeps `rows` (int64 indices into the batch, in that order), then drops the leading positions
// that no kept row holds; with no padding left, the rows are whole again (present undefined).
void keep_rows(KvCache& cache, const torch::Tensor& rows);

}  // namespace gpulab::train
