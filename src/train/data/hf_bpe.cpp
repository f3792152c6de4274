// The byte-level BPE merge loop (see hf_bpe.h).
#include "train/data/hf_bpe.h"

#include <fmt/format.h>

#include <queue>

#include "train/data/hf_byte_map.h"

namespace gpulab::train::hf {

Result<BpeModel> BpeModel::build(std::unordered_map<std::string, int32_t> vocab,
                                 const std::vector<std::pair<std::string, std::string>>& merges,
                                 bool ignore_merges) {
  BpeModel m;
  m.ignore_merges_ = ignore_merges;
  for (const auto& [tok, id] : vocab) {
    if (id < 0 || id >= kMaxId)
      return Error(Code::kDataError,
                   fmt::format("vocabulary id {} is outside 0..{}", id, kMaxId - 1));
    m.id_end_ = std::max(m.id_end_, id + 1);
  }
  m.id_bytes_.resize(static_cast<size_t>(m.id_end_));
  for (const auto& [tok, id] : vocab) {
    auto raw = unspell(tok);
    m.id_bytes_[static_cast<size_t>(id)] = raw ? std::move(*raw) : tok;
  }
  m.vocab_ = std::move(vocab);
  for (int b = 0; b < 256; ++b) {
    const std::string spelled = spell_bytes(std::string(1, static_cast<char>(b)));
    const int32_t id = m.id_of(spelled);
    if (id < 0)
      return Error(Code::kDataError,
                   fmt::format("the vocabulary lacks byte 0x{:02x} ('{}'), so not every text "
                               "encodes: not a byte-level BPE vocabulary",
                               b, spelled));
    m.byte_ids_[static_cast<size_t>(b)] = id;
  }
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    const int32_t ia = m.id_of(a), ib = m.id_of(b), in = m.id_of(a + b);
    if (ia < 0 || ib < 0 || in < 0)
      return Error(Code::kDataError,
                   fmt::format("merge {} ('{} {}') names a token the vocabulary lacks", r, a, b));
    // A repeated pair keeps its last rank, as `tokenizers` builds its map.
    m.merges_[key(ia, ib)] = Merge{static_cast<int32_t>(r), in};
  }
  return m;
}

int32_t BpeModel::id_of(const std::string& spelled) const {
  const auto it = vocab_.find(spelled);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string& BpeModel::bytes_of(int32_t id) const {
  static const std::string none;
  return id >= 0 && id < id_end_ ? id_bytes_[static_cast<size_t>(id)] : none;
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out,
                            PieceCache& cache) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    out.push_back(byte_ids_[static_cast<uint8_t>(bytes[0])]);
    return;
  }
  if (const auto hit = cache.find(bytes); hit != cache.end()) {
    out.insert(out.end(), hit->second.begin(), hit->second.end());
    return;
  }
  std::vector<int32_t> ids;
  // Llama 3's files: a piece that is a whole token is that token, whatever the merges say.
  const int32_t whole = ignore_merges_ ? id_of(spell_bytes(bytes)) : -1;
  if (whole >= 0)
    ids.push_back(whole);
  else
    merge_all(bytes, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  cache.emplace(bytes, std::move(ids));
}

// Symbols in a linked list; a heap of candidate merges (rank, then position); a popped merge
// whose pair has changed since it was pushed is stale and skipped.
void BpeModel::merge_all(std::string_view bytes, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank, pos, new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const auto n = static_cast<int32_t>(bytes.size());
  std::vector<Symbol> sym(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i)
    sym[i] = Symbol{byte_ids_[static_cast<uint8_t>(bytes[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    const auto it = merges_.find(key(sym[pos].id, sym[sym[pos].next].id));
    if (it != merges_.end()) heap.push(Candidate{it->second.rank, pos, it->second.new_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    const auto it = merges_.find(key(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.new_id != c.new_id) continue;
    Symbol& right = sym[left.next];
    left.id = c.new_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    push(left.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace gpulab::train::hf
