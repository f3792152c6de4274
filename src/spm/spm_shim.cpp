// A C interface over SentencePiece, built as its own shared module (libgpulab_spm.so) that
// tokenizer_sentencepiece.cpp loads with dlopen(RTLD_LOCAL | RTLD_DEEPBIND). Why: Debian's
// libsentencepiece carries its own copy of protobuf-lite with exported symbols, and libtorch loads
// libprotobuf.so.32; linked into one binary, protobuf's start-up code binds to SentencePiece's copy
// and crashes before main. Loaded locally and deep-bound, each keeps its own protobuf (as Python
// does with its extension modules).
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <string>
#include <unordered_map>

namespace {

void set_error(char* err, size_t len, const std::string& msg) {
  if (!err || len == 0) return;
  std::strncpy(err, msg.c_str(), len - 1);
  err[len - 1] = '\0';
}

char* copy_out(const std::string& s, size_t* n) {
  auto* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  *n = s.size();
  return p;
}

// SentencePiece's LOG and CHECK write to std::cerr. Deep-bound, this module's std::cerr is
// libstdc++'s own object; but an executable that uses std::cerr itself (gpulab does) holds a copy
// relocation of it, and libstdc++ constructs only that copy. The module then wrote to a stream that
// was never constructed and crashed (issue 43: a BPE warning at a vocabulary the corpus cannot
// fill). Construct the module's view over the standard error buffer the executable uses, once.
// The executable's handle searches the global scope (RTLD_DEFAULT would search this module's own
// scope first, deep-bound, and find libstdc++'s object again).
void bind_stream(void* program, std::ostream& local, const char* symbol) {
  auto* global = static_cast<std::ostream*>(::dlsym(program, symbol));
  if (!global || global == &local) return;  // one object: constructed by libstdc++ already
  new (&local) std::ostream(global->rdbuf());
  local.flags(global->flags());  // std::cerr's unitbuf: each message as it is written
}

void bind_streams() {
  static const bool done = [] {
    void* program = ::dlopen(nullptr, RTLD_NOW);
    if (!program) return false;
    bind_stream(program, std::cerr, "_ZSt4cerr");
    bind_stream(program, std::cout, "_ZSt4cout");
    bind_stream(program, std::clog, "_ZSt4clog");
    ::dlclose(program);
    return true;
  }();
  (void)done;
}

// Lines from the caller's callback, for the trainer. The callback returns 1 with a line, 0 at
// the end, -1 on a read error (the trainer then stops reading and fails; the caller has the why).
class CallbackIterator : public sentencepiece::SentenceIterator {
 public:
  using NextFn = int (*)(void* ctx, const char** line, size_t* len);
  CallbackIterator(NextFn next, void* ctx) : next_(next), ctx_(ctx) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    const char* line = nullptr;
    size_t len = 0;
    const int got = next_(ctx_, &line, &len);
    if (got != 1) {
      done_ = true;
      failed_ = got < 0;
      return;
    }
    value_.assign(line, len);
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override {
    if (!failed_) return {};
    return {sentencepiece::util::StatusCode::kDataLoss, "the input could not be read"};
  }

 private:
  NextFn next_;
  void* ctx_;
  std::string value_;
  bool done_ = false;
  bool failed_ = false;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void* gpulab_spm_load(const char* data, size_t n, char* err,
                                                             size_t err_len) {
  bind_streams();
  auto* sp = new sentencepiece::SentencePieceProcessor();
  const auto st = sp->LoadFromSerializedProto(std::string_view(data, n));
  if (!st.ok()) {
    set_error(err, err_len, st.ToString());
    delete sp;
    return nullptr;
  }
  return sp;
}

__attribute__((visibility("default"))) void gpulab_spm_free(void* h) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(h);
}

// which: 0 vocab size, 1 eos id, 2 bos id.
__attribute__((visibility("default"))) int gpulab_spm_info(void* h, int which) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(h);
  return which == 0 ? sp->GetPieceSize() : which == 1 ? sp->eos_id() : sp->bos_id();
}

// The caller frees *ids with free().
__attribute__((visibility("default"))) int gpulab_spm_encode(void* h, const char* text, size_t n,
                                                             int** ids, size_t* count) {
  std::vector<int> out;
  if (!static_cast<sentencepiece::SentencePieceProcessor*>(h)
           ->Encode(std::string_view(text, n), &out)
           .ok())
    return 0;
  *ids = static_cast<int*>(std::malloc(std::max<size_t>(1, out.size()) * sizeof(int)));
  if (!*ids) return 0;
  std::memcpy(*ids, out.data(), out.size() * sizeof(int));
  *count = out.size();
  return 1;
}

__attribute__((visibility("default"))) char* gpulab_spm_decode(void* h, const int* ids, size_t n,
                                                               size_t* len) {
  std::string out;
  if (!static_cast<sentencepiece::SentencePieceProcessor*>(h)
           ->Decode(std::vector<int>(ids, ids + n), &out)
           .ok())
    return nullptr;
  return copy_out(out, len);
}

// "piece<TAB>score" for one id; the caller frees it.
__attribute__((visibility("default"))) char* gpulab_spm_piece(void* h, int id, size_t* len) {
  auto* sp = static_cast<sentencepiece::SentencePieceProcessor*>(h);
  return copy_out(sp->IdToPiece(id) + "\t" + std::to_string(sp->GetScore(id)), len);
}

// args: "key=value" lines. Returns the serialized model (caller frees) or null with err set.
__attribute__((visibility("default"))) char* gpulab_spm_train(const char* args,
                                                              CallbackIterator::NextFn next,
                                                              void* ctx, size_t* len, char* err,
                                                              size_t err_len) {
  bind_streams();
  std::unordered_map<std::string, std::string> kw;
  std::string all(args);
  size_t start = 0;
  while (start < all.size()) {
    size_t end = all.find('\n', start);
    if (end == std::string::npos) end = all.size();
    const std::string line = all.substr(start, end - start);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) kw[line.substr(0, eq)] = line.substr(eq + 1);
    start = end + 1;
  }
  CallbackIterator lines(next, ctx);
  std::string proto;
  const auto st = sentencepiece::SentencePieceTrainer::Train(kw, &lines, &proto);
  if (!st.ok()) {
    set_error(err, err_len, st.ToString());
    return nullptr;
  }
  return copy_out(proto, len);
}

}  // extern "C"
