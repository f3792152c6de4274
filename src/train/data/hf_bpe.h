// The byte-level BPE model of a Hugging Face tokenizer.json: its vocabulary and ranked merges,
// and the merge loop that turns one pre-tokenized piece of bytes into ids (as `tokenizers` does:
// always the lowest-ranked adjacent pair next, the leftmost of equal ones).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/result.h"

namespace gpulab::train::hf {

// Pieces already encoded during one encode call (keys view that call's text).
using PieceCache = std::unordered_map<std::string_view, std::vector<int32_t>>;

class BpeModel {
 public:
  // Ids past this are refused: no real vocabulary comes near it (Gemma's has 262,144), and a
  // table of one bad id's size would exhaust memory.
  static constexpr int32_t kMaxId = 1 << 24;
  // vocab: byte-level spelled token -> id; merges: pairs of spelled tokens, best rank first.
  // Every one of the 256 byte characters must be in the vocabulary (else a byte could not be
  // encoded), and every merge's parts and result too: kDataError names the first that is not.
  static Result<BpeModel> build(std::unordered_map<std::string, int32_t> vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                bool ignore_merges);

  // Appends the ids of one piece of raw bytes.
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out, PieceCache& cache) const;
  // The id of a spelled token, or -1.
  int32_t id_of(const std::string& spelled) const;
  // One past the largest id of the vocabulary.
  int32_t id_end() const { return id_end_; }
  // The raw bytes of a token id (empty for an id the vocabulary lacks).
  const std::string& bytes_of(int32_t id) const;

 private:
  struct Merge {
    int32_t rank, new_id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_all(std::string_view bytes, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};
  std::vector<std::string> id_bytes_;
  int32_t id_end_ = 0;
  bool ignore_merges_ = false;
};

}  // namespace gpulab::train::hf
