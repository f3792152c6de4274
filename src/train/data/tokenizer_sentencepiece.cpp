// SentencePiece tokenizer and trainer, through libgpulab_spm.so (src/spm/: Debian's
// libsentencepiece loaded privately, away from libtorch's protobuf). Without it
// (GPULAB_HAVE_SENTENCEPIECE unset) both entry points say so and name the bytes mode.
#include <fmt/format.h>

#include <filesystem>
#include <thread>

#include "core/files.h"
#include "train/data/text_source.h"
#include "train/data/tokenizer.h"

#if GPULAB_HAVE_SENTENCEPIECE
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#endif

namespace gpulab::train {

Result<std::unique_ptr<Tokenizer>> open_sentencepiece(const fs::path& model);

#if GPULAB_HAVE_SENTENCEPIECE

namespace {

// The C interface of libgpulab_spm.so (src/spm/spm_shim.cpp), resolved once.
struct SpmApi {
  using NextFn = int (*)(void*, const char**, size_t*);
  void* (*load)(const char*, size_t, char*, size_t) = nullptr;
  void (*free_model)(void*) = nullptr;
  int (*info)(void*, int) = nullptr;
  int (*encode)(void*, const char*, size_t, int**, size_t*) = nullptr;
  char* (*decode)(void*, const int*, size_t, size_t*) = nullptr;
  char* (*piece)(void*, int, size_t*) = nullptr;
  char* (*train)(const char*, NextFn, void*, size_t*, char*, size_t) = nullptr;
  std::string error;
  std::string hint =
      "use --tokenizer bytes, or rebuild gpulab where libsentencepiece-dev is installed";
};

// Where the module may be: the build folder (compile-time path), then beside the executable
// and in ../lib/gpulab (an installed copy).
std::vector<fs::path> module_candidates() {
  std::vector<fs::path> out{GPULAB_SPM_MODULE};
  std::error_code ec;
  const auto exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back(exe.parent_path() / "libgpulab_spm.so");
    out.push_back(exe.parent_path().parent_path() / "lib" / "gpulab" / "libgpulab_spm.so");
  }
  return out;
}

const SpmApi& spm_api() {
  static SpmApi api;
  static std::once_flag once;
  std::call_once(once, [] {
#if defined(__SANITIZE_ADDRESS__)
    // AddressSanitizer refuses RTLD_DEEPBIND (google/sanitizers#611), and loaded without it the
    // module's bundled protobuf binds libtorch's, which refuses it at first use (seen in make
    // sanitize-train: "compiled against version 3.14.0 ... installed version (3.21.12)").
    api.error =
        "this gpulab is built with AddressSanitizer, which cannot load the SentencePiece "
        "module apart from libtorch's protobuf";
    api.hint = "use --tokenizer bytes, or a gpulab built without GPULAB_SANITIZE";
    return;
#endif
    void* h = nullptr;
    std::string why;
    for (const auto& p : module_candidates()) {
      // Local and deep-bound: SentencePiece's bundled protobuf stays out of libtorch's way.
      h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (h) break;
      const char* e = ::dlerror();
      why += fmt::format("{}: {}; ", p.string(), e ? e : "not loadable");
    }
    if (!h) {
      api.error = "cannot load the SentencePiece module (" + why + ")";
      return;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn && api.error.empty()) api.error = std::string("SentencePiece module lacks ") + name;
    };
    sym(api.load, "gpulab_spm_load");
    sym(api.free_model, "gpulab_spm_free");
    sym(api.info, "gpulab_spm_info");
    sym(api.encode, "gpulab_spm_encode");
    sym(api.decode, "gpulab_spm_decode");
    sym(api.piece, "gpulab_spm_piece");
    sym(api.train, "gpulab_spm_train");
  });
  return api;
}

Error module_error(const SpmApi& api) {
  return Error(Code::kUnsupported, api.error, api.hint);
}

struct MallocFree {
  void operator()(void* p) const { std::free(p); }
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const SpmApi& api, void* model) : api_(api), model_(model) {}
  ~SentencePieceTokenizer() override { api_.free_model(model_); }
  std::string kind() const override { return "sentencepiece"; }
  int64_t vocab_size() const override { return api_.info(model_, 0); }
  int64_t eos_id() const override { return api_.info(model_, 1); }
  int64_t bos_id() const override { return api_.info(model_, 2); }
  std::vector<int32_t> encode(std::string_view text) const override {
    int* ids = nullptr;
    size_t n = 0;
    // Encoding only fails on an unloaded model, which open_sentencepiece rules out.
    GPULAB_ASSERT(api_.encode(model_, text.data(), text.size(), &ids, &n) == 1,
                  "SentencePiece encode failed on a loaded model");
    std::unique_ptr<int, MallocFree> owned(ids);
    return {ids, ids + n};
  }
  Result<std::string> decode(const std::vector<int32_t>& ids) const override {
    const int64_t n = vocab_size();
    for (int32_t id : ids)
      if (id < 0 || id >= n)
        return Error(
            Code::kInvalidArgument,
            fmt::format("token id {} is outside the tokenizer's vocabulary (0..{})", id, n - 1));
    std::vector<int> in(ids.begin(), ids.end());
    size_t len = 0;
    std::unique_ptr<char, MallocFree> out(api_.decode(model_, in.data(), in.size(), &len));
    if (!out) return Error(Code::kInternal, "SentencePiece could not decode");
    return std::string(out.get(), len);
  }
  std::string piece(int id) const {
    size_t len = 0;
    std::unique_ptr<char, MallocFree> p(api_.piece(model_, id, &len));
    return p ? std::string(p.get(), len) : std::string();
  }

 private:
  const SpmApi& api_;
  void* model_;
};

Result<std::unique_ptr<SentencePieceTokenizer>> load_model(const std::string& bytes,
                                                           const std::string& what) {
  const SpmApi& api = spm_api();
  if (!api.error.empty()) return module_error(api);
  char err[512] = {0};
  void* model = api.load(bytes.data(), bytes.size(), err, sizeof err);
  if (!model)
    return Error(Code::kDataError, fmt::format("{} is not a SentencePiece model: {}", what, err),
                 "train one with: gpulab tokenizer train --input FILES --vocab_size N --out DIR");
  return std::make_unique<SentencePieceTokenizer>(api, model);
}

// Feeds the trainer one line at a time from plain text or JSONL inputs.
struct LineFeed {
  TextReader reader;
  TextBlock block;
  std::vector<std::string> lines;
  std::string current;
  std::optional<Error> error;

  // 1 with a line, 0 at the end (or on a read error, kept in `error`).
  static int next(void* ctx, const char** line, size_t* len) {
    auto* f = static_cast<LineFeed*>(ctx);
    while (f->lines.empty()) {
      auto more = f->reader.next(f->block);
      if (!more) {
        f->error = more.error();
        return 0;
      }
      if (!*more) return 0;
      size_t start = 0;
      const std::string& t = f->block.text;
      while (start < t.size()) {
        size_t end = t.find('\n', start);
        if (end == std::string::npos) end = t.size();
        if (end > start) f->lines.push_back(t.substr(start, end - start));
        start = end + 1;
      }
      std::reverse(f->lines.begin(), f->lines.end());
    }
    f->current = std::move(f->lines.back());
    f->lines.pop_back();
    *line = f->current.data();
    *len = f->current.size();
    return 1;
  }
};

}  // namespace

bool sentencepiece_available() {
  return spm_api().error.empty();
}

Result<std::unique_ptr<Tokenizer>> open_sentencepiece(const fs::path& model) {
  // Unusable here: that, whatever the path (as in a build without SentencePiece).
  if (const SpmApi& api = spm_api(); !api.error.empty()) return module_error(api);
  std::error_code ec;
  if (!fs::is_regular_file(model, ec))
    return Error(Code::kNotFound, "no tokenizer model at " + model.string(),
                 "pass --tokenizer bytes, or train one: gpulab tokenizer train --input FILES "
                 "--vocab_size N --out DIR");
  auto bytes = read_file(model);
  if (!bytes) return bytes.error();
  auto tok = load_model(*bytes, model.string());
  if (!tok) return tok.error();
  return std::unique_ptr<Tokenizer>(std::move(*tok));
}

Result<fs::path> train_sentencepiece(const TokenizerTrainOptions& o) {
  if (o.vocab_size < 260 || o.vocab_size > (int64_t{1} << 24))
    return Error(Code::kInvalidArgument,
                 fmt::format("--vocab_size {} is out of range (260 .. 16777216: byte fallback "
                             "needs 256 ids plus the special ones)",
                             o.vocab_size));
  if (o.model_type != "bpe" && o.model_type != "unigram")
    return Error(Code::kInvalidArgument, "--model_type must be bpe or unigram");
  const SpmApi& api = spm_api();
  if (!api.error.empty()) return module_error(api);
  auto reader = TextReader::open(o.inputs);
  if (!reader) return reader.error();
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::pair<std::string, std::string>> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", "true"},
      {"character_coverage", "1.0"},
      {"split_digits", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(threads)},
      {"max_sentence_length", "16384"},
      {"minloglevel", "1"},
      // SentencePiece strips and collapses whitespace by default; a language model should see
      // the text as it is (indentation, blank lines) and decode it back unchanged.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
  };
  if (o.max_sentences > 0) {
    args.emplace_back("input_sentence_size", std::to_string(o.max_sentences));
    args.emplace_back("shuffle_input_sentence", "true");
  }
  std::string joined;
  for (const auto& [k, v] : args) joined += k + "=" + v + "\n";
  LineFeed feed{std::move(*reader), {}, {}, {}, std::nullopt};
  char err[1024] = {0};
  size_t len = 0;
  std::unique_ptr<char, MallocFree> proto(
      api.train(joined.c_str(), &LineFeed::next, &feed, &len, err, sizeof err));
  if (feed.error) return *feed.error;
  if (!proto)
    return Error(Code::kInvalidArgument, std::string("SentencePiece could not train: ") + err,
                 "a smaller --vocab_size fits a small corpus");
  const std::string bytes(proto.get(), len);
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec)
    return Error(Code::kInvalidArgument,
                 fmt::format("cannot create {}: {}", o.out_dir.string(), ec.message()));
  // The vocabulary as text (id order, piece and score), for people and other tools.
  auto tok = load_model(bytes, "the trained model");
  if (!tok) return tok.error();
  std::string vocab;
  for (int i = 0; i < (*tok)->vocab_size(); ++i) vocab += (*tok)->piece(i) + "\n";
  const auto path = o.out_dir / "tokenizer.model";
  if (auto s = write_file_atomic(o.out_dir / "tokenizer.vocab", vocab); !s) return s.error();
  if (auto s = write_file_atomic(path, bytes); !s) return s.error();
  return path;
}

#else  // no SentencePiece in this build

bool sentencepiece_available() {
  return false;
}

namespace {
Error unavailable() {
  return Error(Code::kUnsupported, "this gpulab was built without SentencePiece",
               "use --tokenizer bytes, or install libsentencepiece-dev and rebuild");
}
}  // namespace

Result<std::unique_ptr<Tokenizer>> open_sentencepiece(const fs::path& /*model*/) {
  return unavailable();
}

Result<fs::path> train_sentencepiece(const TokenizerTrainOptions& /*opts*/) {
  return unavailable();
}

#endif

}  // namespace gpulab::train
