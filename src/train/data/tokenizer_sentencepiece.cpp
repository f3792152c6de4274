// SentencePiece tokenizer and trainer, through libgpulab_spm.so (src/spm/: Debian's
// libsentencepiece loaded privately, away from libtorch's protobuf). Without it
// (GPULAB_HAVE_SENTENCEPIECE unset) both entry points say so and name the bytes mode.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "core/files.h"
#include "train/data/text_source.h"
#include "train/data/tokenizer.h"

#if GPULAB_HAVE_SENTENCEPIECE
#include <dlfcn.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>
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

// What a file SentencePiece cannot parse looks like instead, for its error (its parser's own
// message names only a line of its source).
std::string what_it_looks_like(const std::string& bytes) {
  if (bytes.rfind("PK\x03\x04", 0) == 0)
    return "it is a zip archive: a PyTorch checkpoint or weights file?";
  if (bytes.size() > 9 && bytes[8] == '{' && bytes.find("\"dtype\"") != std::string::npos)
    return "it is a safetensors weights file";
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{')
    return "it is JSON: a tokenizer.json is passed as itself, or its folder";
  return "SentencePiece cannot parse it";
}

Result<std::unique_ptr<SentencePieceTokenizer>> load_model(const std::string& bytes,
                                                           const std::string& what) {
  const SpmApi& api = spm_api();
  if (!api.error.empty()) return module_error(api);
  char err[512] = {0};
  void* model = api.load(bytes.data(), bytes.size(), err, sizeof err);
  if (!model)
    return Error(
        Code::kDataError,
        fmt::format("{} is not a SentencePiece model ({})", what, what_it_looks_like(bytes)),
        "pass the tokenizer.model of the run or data folder (--tokenizer), or train one: "
        "gpulab tokenizer train --input FILES --vocab_size N --out DIR");
  return std::make_unique<SentencePieceTokenizer>(api, model);
}

// Feeds the trainer one line at a time from plain text or JSONL inputs.
struct LineFeed {
  TextReader reader;
  TextBlock block;
  std::vector<std::string> lines;  // the current block's, last first
  std::string current;
  std::optional<Error> error;

  // Reads blocks until there is a line: true with one, false at the end or on a read error
  // (kept in `error`). Called once before training, so that no text is said before it starts.
  bool fill() {
    while (lines.empty()) {
      auto more = reader.next(block);
      if (!more) {
        error = more.error();
        return false;
      }
      if (!*more) return false;
      size_t start = 0;
      const std::string& t = block.text;
      while (start < t.size()) {
        size_t end = t.find('\n', start);
        if (end == std::string::npos) end = t.size();
        if (end > start) lines.push_back(t.substr(start, end - start));
        start = end + 1;
      }
      std::reverse(lines.begin(), lines.end());
    }
    return true;
  }

  // 1 with a line, 0 at the end, -1 on a read error.
  static int next(void* ctx, const char** line, size_t* len) {
    auto* f = static_cast<LineFeed*>(ctx);
    if (!f->fill()) return f->error ? -1 : 0;
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

namespace {

// What SentencePiece cannot be asked for, said in gpulab's flags before any text is read.
std::optional<Error> check_tokenizer_options(const TokenizerTrainOptions& o) {
  static const std::set<std::string> kTypes = {"bpe", "unigram", "char", "word"};
  if (!kTypes.count(o.model_type))
    return Error(
        Code::kInvalidArgument,
        fmt::format("--model_type {} is not one of bpe, unigram, char, word", o.model_type));
  // SentencePiece's own bounds (trainer_interface.cc checks 0.98 .. 1).
  if (!(o.character_coverage >= 0.98 && o.character_coverage <= 1.0))
    return Error(Code::kInvalidArgument,
                 fmt::format("--character_coverage {} must be in [0.98, 1]", o.character_coverage),
                 "1.0 keeps every character; 0.9995 is usual for Chinese or Japanese text");
  std::set<std::string> seen;
  for (const auto& u : o.user_defined_symbols) {
    if (u.empty() || u.find_first_of(",\n") != std::string::npos || !seen.insert(u).second ||
        u == "<unk>" || u == "<s>" || u == "</s>" || check_utf8_text(u, "symbol"))
      return Error(Code::kInvalidArgument,
                   fmt::format("--user_defined_symbols: \"{}\" cannot be a symbol", u),
                   "each symbol is non-empty UTF-8 without commas, given once, and not <unk>, "
                   "<s> or </s>");
  }
  // unk, bos, eos; the 256 byte pieces; the user's symbols; at least one piece of text.
  const int64_t least =
      3 + (o.byte_fallback ? 256 : 0) + static_cast<int64_t>(o.user_defined_symbols.size()) + 1;
  if (o.vocab_size < least || o.vocab_size > (int64_t{1} << 24))
    return Error(Code::kInvalidArgument,
                 fmt::format("--vocab_size {} is out of range ({} .. 16777216: {}3 special ids{} "
                             "and the text's own pieces)",
                             o.vocab_size, least, o.byte_fallback ? "256 byte ids, " : "",
                             o.user_defined_symbols.empty() ? "" : ", the user-defined symbols"));
  return std::nullopt;
}

std::string spm_train_args(const TokenizerTrainOptions& o) {
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string symbols;
  for (const auto& u : o.user_defined_symbols) symbols += (symbols.empty() ? "" : ",") + u;
  std::vector<std::pair<std::string, std::string>> args = {
      {"model_type", o.model_type},
      {"vocab_size", std::to_string(o.vocab_size)},
      {"byte_fallback", o.byte_fallback ? "true" : "false"},
      {"character_coverage", fmt::format("{}", o.character_coverage)},
      {"split_digits", "true"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"num_threads", std::to_string(threads)},
      {"max_sentence_length", "16384"},
      // Warnings and progress stay quiet: what goes wrong comes back as a status, said in
      // gpulab's words (explain_train_error).
      {"minloglevel", "2"},
      // SentencePiece strips and collapses whitespace by default; a language model should see
      // the text as it is (indentation, blank lines) and decode it back unchanged.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
  };
  if (!symbols.empty()) args.emplace_back("user_defined_symbols", symbols);
  if (o.max_sentences > 0) {
    args.emplace_back("input_sentence_size", std::to_string(o.max_sentences));
    args.emplace_back("shuffle_input_sentence", "true");
  }
  std::string joined;
  for (const auto& [k, v] : args) joined += k + "=" + v + "\n";
  return joined;
}

// The numbers in `s` after `phrase`, in order ("... required_chars. 260 vs 267." -> 260, 267).
std::vector<int64_t> numbers_after(const std::string& s, const std::string& phrase) {
  std::vector<int64_t> out;
  const size_t from = s.find(phrase);
  for (size_t i = from == std::string::npos ? s.size() : from; i < s.size();) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    out.push_back(std::stoll(s.substr(i, std::min<size_t>(j - i, 15))));
    i = j;
  }
  return out;
}

// SentencePiece's refusal, with a hint that names gpulab's flags and the right direction: its
// trainer says "too high (N) ... <= M" for a vocabulary the corpus cannot fill, and "smaller
// than required_chars. N vs M" for one that cannot hold the corpus's characters.
Error explain_train_error(const TokenizerTrainOptions& o, std::string spm) {
  // "./src/trainer_interface.cc(660) [(a) == (b)] Message": the message alone.
  if (const size_t at = spm.find("] "); at != std::string::npos && at + 2 < spm.size())
    spm = spm.substr(at + 2);
  if (const auto n = numbers_after(spm, "too high"); n.size() >= 2)
    return Error(Code::kInvalidArgument,
                 fmt::format("--vocab_size {} is more than this corpus can fill: SentencePiece "
                             "finds at most {} pieces in it",
                             o.vocab_size, n[1]),
                 fmt::format("pass --vocab_size {} or less, or train on more text", n[1]));
  if (const auto n = numbers_after(spm, "required_chars"); n.size() >= 2)
    return Error(Code::kInvalidArgument,
                 fmt::format("--vocab_size {} is too small for this corpus: its characters{} and "
                             "the special ids need {}",
                             o.vocab_size, o.byte_fallback ? ", the 256 byte pieces" : "", n[1]),
                 fmt::format("pass --vocab_size {} or more, or a lower --character_coverage (e.g. "
                             "0.9995) so that rare characters become {}",
                             n[1], o.byte_fallback ? "bytes" : "<unk>"));
  return Error(Code::kInvalidArgument, "SentencePiece could not train: " + spm,
               "check the --input text and the flags (gpulab tokenizer train --help)");
}

Result<fs::path> write_model(const TokenizerTrainOptions& o, const std::string& bytes) {
  // The vocabulary as text (id order, piece and score), for people and other tools.
  auto tok = load_model(bytes, "the trained model");
  if (!tok) return tok.error();
  std::string vocab;
  for (int i = 0; i < (*tok)->vocab_size(); ++i) vocab += (*tok)->piece(i) + "\n";
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec)
    return Error(Code::kInvalidArgument,
                 fmt::format("cannot create {}: {}", o.out_dir.string(), ec.message()));
  const auto path = o.out_dir / "tokenizer.model";
  if (auto s = write_file_atomic(o.out_dir / "tokenizer.vocab", vocab); !s) return s.error();
  if (auto s = write_file_atomic(path, bytes); !s) return s.error();
  return path;
}

}  // namespace

Result<fs::path> train_sentencepiece(const TokenizerTrainOptions& o) {
  if (auto bad = check_tokenizer_options(o)) return *bad;
  const SpmApi& api = spm_api();
  if (!api.error.empty()) return module_error(api);
  auto reader = TextReader::open(o.inputs);
  if (!reader) return reader.error();
  const std::string args = spm_train_args(o);
  LineFeed feed{std::move(*reader), {}, {}, {}, std::nullopt};
  if (!feed.fill()) {
    if (feed.error) return *feed.error;
    return Error(Code::kInvalidArgument, "the inputs hold no text", "check the --input files");
  }
  char err[1024] = {0};
  size_t len = 0;
  std::unique_ptr<char, MallocFree> proto(
      api.train(args.c_str(), &LineFeed::next, &feed, &len, err, sizeof err));
  if (feed.error) return *feed.error;
  if (!proto) return explain_train_error(o, err);
  return write_model(o, std::string(proto.get(), len));
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
