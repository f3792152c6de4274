// Decoder footprints from the shape: exact flat groups, activations from probe models (see .h).
#include "train/dist/decoder_footprint.h"

#include <array>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/error.h"
#include "train/models/lm_families.h"
#include "train/ops/batched_attention.h"

namespace gpulab::train::dist {

namespace {

// What one block and the root keep per sample grow linearly in these products of the shape
// (elements; the attention scores are the heads x T x T term of the plain softmax path, the
// T x T term its causal mask).
constexpr size_t kBlockTerms = 7;
constexpr size_t kRootTerms = 4;

struct FootprintShape {
  int64_t hidden, inter, heads, kv_heads, head_dim, vocab, tokens;
};

std::array<double, kBlockTerms> block_terms(const FootprintShape& s) {
  const double t = static_cast<double>(s.tokens);
  const double q = static_cast<double>(s.heads * s.head_dim);
  const double kv = static_cast<double>(s.kv_heads * s.head_dim);
  const double gqa = s.kv_heads != s.heads ? 1.0 : 0.0;
  return {t * static_cast<double>(s.hidden),    t * q, t * kv,     t * static_cast<double>(s.inter),
          static_cast<double>(s.heads) * t * t, t,     gqa * t * q};
}

std::array<double, kRootTerms> root_terms(const FootprintShape& s) {
  const double t = static_cast<double>(s.tokens);
  return {t * static_cast<double>(s.hidden), t * static_cast<double>(s.vocab), t,
          t * static_cast<double>(s.head_dim)};
}

DecoderConfig config_of(const FootprintShape& s, int64_t layers, const std::string& family) {
  DecoderConfig c;
  c.name = "planner probe";
  c.family = family;
  c.vocab_size = s.vocab;
  c.hidden_size = s.hidden;
  c.intermediate_size = s.inter;
  c.num_layers = layers;
  c.num_heads = s.heads;
  c.num_kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.max_positions = s.tokens;
  return c;
}

// Forward-pass bytes per sample of the real model (the planner's counter), on
// scaled_dot_product_attention or the fused kernel: a plan is for any length and device, and
// gpulab's batched CPU attention (up to kBatchedAttentionBytes a layer more) serves short CPU
// sequences alone.
ModelFootprint measure(const DecoderConfig& c, int64_t seq_len, bool fused_attention) {
  struct SdpaOnly {
    bool before = set_batched_attention(false);
    SdpaOnly() = default;
    ~SdpaOnly() { set_batched_attention(before); }
    SdpaOnly(const SdpaOnly&) = delete;
    SdpaOnly& operator=(const SdpaOnly&) = delete;
  } const sdpa_only;
  torch::manual_seed(0);
  auto model = build_causal_lm(c);
  model->set_fused_attention(fused_attention);
  model->train();
  auto tokens = torch::zeros({1, seq_len}, torch::kLong);
  return measure_footprint(*model, "auto", [&] { return model->forward(tokens); });
}

// Least squares over the probes' measurements: rows of terms -> bytes. A term the probes never
// vary apart from another (GPT-2 has no grouped-query attention, so its kv term equals its q term
// and its GQA term is zero) is left out and gets 0: a rank-deficient solve split such columns
// differently from one process to the next (a gpt2 plan moved 20 %).
template <size_t N>
std::array<double, N> fit(const std::vector<std::array<double, N>>& rows,
                          const std::vector<double>& bytes) {
  std::vector<size_t> used;
  for (size_t j = 0; j < N; ++j) {
    bool zero = true;
    for (const auto& r : rows) zero = zero && r[j] == 0.0;
    bool repeats = false;
    for (size_t k : used) {
      bool same = true;
      for (const auto& r : rows) same = same && r[j] == r[k];
      repeats = repeats || same;
    }
    if (!zero && !repeats) used.push_back(j);
  }
  const auto n_rows = static_cast<int64_t>(rows.size());
  auto a = torch::empty({n_rows, static_cast<int64_t>(used.size())}, torch::kDouble);
  auto b = torch::empty({n_rows, 1}, torch::kDouble);
  for (int64_t i = 0; i < n_rows; ++i) {
    for (size_t c = 0; c < used.size(); ++c)
      a[i][static_cast<int64_t>(c)] = rows[static_cast<size_t>(i)][used[c]];
    b[i][0] = bytes[static_cast<size_t>(i)];
  }
  auto x = std::get<0>(at::linalg_lstsq(a, b));
  std::array<double, N> out{};
  for (size_t c = 0; c < used.size(); ++c)
    out[used[c]] = x[static_cast<int64_t>(c)][0].item<double>();
  return out;
}

struct Fit {
  std::array<double, kBlockTerms> block{};
  std::array<double, kRootTerms> root{};
};

// Probe shapes that move each term on its own (a few ms each on a CPU), run on the attention
// path asked for (fused: gpulab's CPU kernel, or scaled_dot_product_attention on libtorch 2.x),
// fitted once per family and path.
// One intra-op thread while it lives, the caller's count again after (an exception included).
struct OneThread {
  int before = torch::get_num_threads();
  OneThread() { torch::set_num_threads(1); }
  ~OneThread() { torch::set_num_threads(before); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;
};

Fit fit_family(const std::string& family, bool fused_attention) {
  const DecoderTraits* traits = decoder_traits(family);
  GPULAB_ASSERT(traits != nullptr, "fit_family: a validated config's family");
  Fit fit_result;
  {
    torch::AutoGradMode grad(true);  // activations are what autograd would keep
    // One thread: the CPU kernels' per-thread scratch would otherwise enter the fit, and a plan
    // would depend on the cores of the machine that makes it (gpt2-124m's activations were
    // planned at 1014 MiB with OMP_NUM_THREADS=1 and 699 MiB with 4).
    const OneThread one_thread;
    const std::vector<FootprintShape> probes = {
        {32, 48, 4, 4, 8, 64, 8},   {64, 48, 4, 4, 16, 64, 8},  {32, 96, 4, 4, 8, 64, 8},
        {32, 48, 4, 2, 8, 64, 8},   {32, 48, 4, 4, 8, 64, 16},  {32, 48, 8, 8, 4, 96, 8},
        {32, 48, 2, 2, 16, 64, 16}, {64, 48, 8, 2, 8, 128, 16}, {32, 48, 4, 4, 12, 64, 8},
        {32, 64, 4, 1, 8, 64, 24},  {32, 48, 4, 4, 8, 64, 32},  {64, 96, 8, 4, 8, 64, 12},
    };
    std::vector<std::array<double, kBlockTerms>> block_rows;
    std::vector<std::array<double, kRootTerms>> root_rows;
    std::vector<double> block_bytes, root_bytes;
    for (const auto& s : probes) {
      // A family without grouped-query attention probes with kv heads = heads.
      FootprintShape p = s;
      if (!traits->grouped_query) p.kv_heads = p.heads;
      const auto one = measure(config_of(p, 1, family), p.tokens, fused_attention);
      const auto two = measure(config_of(p, 2, family), p.tokens, fused_attention);
      const double block =
          static_cast<double>(two.activation_bytes_per_sample - one.activation_bytes_per_sample);
      block_rows.push_back(block_terms(p));
      block_bytes.push_back(block);
      root_rows.push_back(root_terms(p));
      root_bytes.push_back(static_cast<double>(one.activation_bytes_per_sample) - block);
    }
    fit_result.block = fit(block_rows, block_bytes);
    fit_result.root = fit(root_rows, root_bytes);
  }
  return fit_result;
}

const Fit& coefficients(const std::string& family, bool fused_attention) {
  static std::mutex mu;
  static std::map<std::pair<std::string, bool>, Fit> fits;
  const std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(family, fused_attention);
  auto it = fits.find(key);
  if (it == fits.end()) it = fits.emplace(key, fit_family(family, fused_attention)).first;
  return it->second;
}

template <size_t N>
double dot(const std::array<double, N>& a, const std::array<double, N>& b) {
  double s = 0;
  for (size_t i = 0; i < N; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

ModelFootprint decoder_footprint(const DecoderConfig& c, int64_t seq_len, bool fused_attention,
                                 int64_t element_bytes) {
  ModelFootprint f;
  const auto& traits = c.traits();
  const int64_t h = c.hidden_size, hd = c.dim_per_head();
  // One unit per block: its matrices, then its vectors (norms, biases), as measure_footprint
  // groups them.
  for (int64_t l = 0; l < c.num_layers; ++l) {
    f.units.push_back({c.block_matrix_parameters(), c.block_vector_parameters()});
    f.frees.push_back(true);
  }
  // The root: embeddings (a learned position table too) and output projection (tied: one
  // table), then the final norm.
  f.units.push_back({c.vocab_size * h * (c.tie_word_embeddings ? 1 : 2) +
                         (traits.rotary ? 0 : c.max_positions * h),
                     (traits.norm_bias ? 2 : 1) * h});
  f.frees.push_back(false);
  f.params = c.num_parameters();
  f.param_bytes = element_bytes;
  const FootprintShape s{h,  c.intermediate_size, c.num_heads, c.num_kv_heads,
                         hd, c.vocab_size,        seq_len};
  const Fit& k = coefficients(c.family, fused_attention);
  const double bytes =
      dot(k.root, root_terms(s)) + static_cast<double>(c.num_layers) * dot(k.block, block_terms(s));
  f.activation_bytes_per_sample =
      static_cast<int64_t>(bytes * static_cast<double>(element_bytes) / 4);
  f.unit_input_bytes_per_sample = c.num_layers * seq_len * h * f.param_bytes;
  return f;
}

ModelFootprint measured_decoder_footprint(const DecoderConfig& c, int64_t seq_len,
                                          bool fused_attention) {
  torch::AutoGradMode grad(true);
  return measure(c, seq_len, fused_attention);
}

GenerationMemory generation_memory(const DecoderConfig& c, int64_t rows, int64_t length,
                                   int64_t weight_bytes, int64_t activation_bytes) {
  GenerationMemory g;
  g.weights = c.num_parameters() * weight_bytes;
  g.kv_cache =
      2 * c.num_layers * c.num_kv_heads * c.dim_per_head() * length * rows * activation_bytes;
  g.logits = rows * c.vocab_size * activation_bytes;
  return g;
}

}  // namespace gpulab::train::dist
