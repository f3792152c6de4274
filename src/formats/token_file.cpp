// Token data folders: meta.json, memory-mapped .bin files, and the writer (see token_file.h).
#include "formats/token_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/atomic_file.h"
#include "core/disk_space.h"
#include "core/files.h"
#include "core/json.h"
#include "core/json_fields.h"
#include "core/strings.h"

namespace gpulab::formats {

namespace {

constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
constexpr int64_t kMaxTokens = int64_t{1} << 56;  // 2^58 bytes of uint32 ids: no disk holds it

uint64_t fnv1a(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

std::string hex64(uint64_t v) {
  return fmt::format("{:016x}", v);
}

// An integer field of meta.json: a float or a number beyond int64 is refused, not cast.
int64_t integer_field(const Json& j, const char* key) {
  const auto v = json_int64(j, key);
  if (!v) throw std::invalid_argument(std::string(key) + " is missing or not an integer");
  return *v;
}

constexpr const char* kRegenerate =
    "tokenize the text again: gpulab data tokenize --input FILES --out DIR";

}  // namespace

TokenDtype token_dtype_for_vocab(int64_t vocab_size) {
  return vocab_size <= 65536 ? TokenDtype::kUint16 : TokenDtype::kUint32;
}

int64_t token_width(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? 2 : 4;
}

const char* token_dtype_name(TokenDtype dtype) {
  return dtype == TokenDtype::kUint16 ? "uint16" : "uint32";
}

double TokenMeta::bytes_per_token() const {
  return train.tokens > 0
             ? static_cast<double>(train.text_bytes) / static_cast<double>(train.tokens)
             : 1.0;
}

double TokenMeta::val_bytes_per_token() const {
  return val.tokens > 0 ? static_cast<double>(val.text_bytes) / static_cast<double>(val.tokens)
                        : bytes_per_token();
}

// ---- meta.json ----

std::string token_meta_to_json(const TokenMeta& m) {
  auto split = [](const TokenSplitMeta& s) {
    OrderedJson j;
    j["tokens"] = s.tokens;
    j["text_bytes"] = s.text_bytes;
    j["fnv1a64"] = hex64(s.checksum);
    return j;
  };
  OrderedJson j;
  j["format"] = "gpulab-tokens";
  j["format_version"] = m.format_version;
  j["vocab_size"] = m.vocab_size;
  j["dtype"] = token_dtype_name(m.dtype);
  j["tokenizer"] = m.tokenizer;
  j["tokenizer_model"] = m.tokenizer_model;
  j["eos_id"] = m.eos_id;
  j["bytes_per_token"] = m.bytes_per_token();
  j["train"] = split(m.train);
  j["val"] = split(m.val);
  j["sources"] = m.sources;
  return j.dump(2) + "\n";
}

Result<TokenMeta> token_meta_from_json(const std::string& text) {
  auto parsed = parse_json(text, "meta.json");
  if (!parsed) return parsed.error();
  const Json& j = *parsed;
  try {
    if (j.value("format", "") != "gpulab-tokens")
      return Error(Code::kDataError, "meta.json is not a gpulab token folder's (format field)");
    TokenMeta m;
    const int64_t version = integer_field(j, "format_version");
    if (version != 1)
      return Error(
          Code::kUnsupported,
          fmt::format("meta.json format_version {} is newer than this gpulab reads (1)", version));
    m.format_version = 1;
    m.vocab_size = integer_field(j, "vocab_size");
    const auto dtype = j.at("dtype").get<std::string>();
    if (dtype != "uint16" && dtype != "uint32")
      return Error(Code::kDataError, "meta.json dtype must be uint16 or uint32, not " + dtype);
    m.dtype = dtype == "uint16" ? TokenDtype::kUint16 : TokenDtype::kUint32;
    if (m.vocab_size <= 0 || (m.dtype == TokenDtype::kUint16 && m.vocab_size > 65536))
      return Error(Code::kDataError,
                   fmt::format("meta.json vocab_size {} does not fit {}", m.vocab_size, dtype));
    m.tokenizer = j.at("tokenizer").get<std::string>();
    m.tokenizer_model = j.value("tokenizer_model", "");
    m.eos_id = j.contains("eos_id") ? integer_field(j, "eos_id") : -1;
    auto split = [](const Json& s) {
      TokenSplitMeta out;
      out.tokens = integer_field(s, "tokens");
      out.text_bytes = integer_field(s, "text_bytes");
      const auto sum = s.at("fnv1a64").get<std::string>();
      if (sum.empty() || sum.size() > 16 ||
          sum.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        throw std::invalid_argument("fnv1a64 '" + printable(sum) +
                                    "' is not a 64-bit hex checksum");
      out.checksum = std::stoull(sum, nullptr, 16);
      return out;
    };
    m.train = split(j.at("train"));
    m.val = split(j.at("val"));
    // Counts that no file can hold (their byte size would overflow) are refused here, before a
    // reader multiplies them.
    for (const TokenSplitMeta* sp : {&m.train, &m.val}) {
      if (sp->tokens < 0 || sp->text_bytes < 0)
        return Error(Code::kDataError, "meta.json has a negative token or byte count");
      if (sp->tokens > kMaxTokens)
        return Error(
            Code::kDataError,
            fmt::format("meta.json claims {} tokens, more than any file holds", sp->tokens));
    }
    if (m.eos_id < -1 || m.eos_id >= m.vocab_size)
      return Error(Code::kDataError,
                   fmt::format("meta.json eos_id {} is outside the vocabulary of {}", m.eos_id,
                               m.vocab_size));
    if (j.contains("sources")) m.sources = j.at("sources").get<std::vector<std::string>>();
    return m;
  } catch (const std::exception& e) {
    return Error(Code::kDataError,
                 std::string("meta.json is missing a field or has a wrong type: ") + e.what());
  }
}

// ---- TokenFile ----

Result<TokenFile> TokenFile::open(const fs::path& path, TokenDtype dtype, int64_t tokens) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error(Code::kNotFound,
                 fmt::format("cannot open {}: {}", path.string(), std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return Error(Code::kDataError, "cannot stat " + path.string());
  }
  GPULAB_ASSERT(tokens >= 0 && tokens <= kMaxTokens, "token counts are checked with meta.json");
  const auto want = static_cast<uint64_t>(tokens) * static_cast<uint64_t>(token_width(dtype));
  if (static_cast<uint64_t>(st.st_size) != want) {
    ::close(fd);
    return Error(Code::kDataError,
                 fmt::format("{} is truncated or corrupt: {} bytes, meta.json says {} {} tokens "
                             "({} bytes)",
                             path.string(), st.st_size, tokens, token_dtype_name(dtype), want),
                 kRegenerate);
  }
  TokenFile f;
  f.tokens_ = tokens;
  f.dtype_ = dtype;
  f.bytes_ = static_cast<size_t>(want);
  if (f.bytes_ > 0) {
    void* p = ::mmap(nullptr, f.bytes_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      return Error(Code::kDataError,
                   fmt::format("cannot map {}: {}", path.string(), std::strerror(errno)));
    }
    f.data_ = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
  return f;
}

TokenFile::TokenFile(TokenFile&& o) noexcept {
  *this = std::move(o);
}

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(const_cast<unsigned char*>(data_), bytes_);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    tokens_ = std::exchange(o.tokens_, 0);
    dtype_ = o.dtype_;
  }
  return *this;
}

TokenFile::~TokenFile() {
  if (data_) ::munmap(const_cast<unsigned char*>(data_), bytes_);
}

int64_t TokenFile::at(int64_t i) const {
  GPULAB_ASSERT(i >= 0 && i < tokens_, "token index out of range");
  if (dtype_ == TokenDtype::kUint16) {
    uint16_t v;
    std::memcpy(&v, data_ + 2 * i, 2);
    return v;
  }
  uint32_t v;
  std::memcpy(&v, data_ + 4 * i, 4);
  return v;
}

void TokenFile::read(int64_t offset, int64_t count, int64_t* out) const {
  GPULAB_ASSERT(offset >= 0 && count >= 0 && offset + count <= tokens_, "token range out of file");
  if (dtype_ == TokenDtype::kUint16) {
    const auto* p = reinterpret_cast<const uint16_t*>(data_) + offset;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(data_) + offset;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  }
}

std::pair<uint64_t, int64_t> TokenFile::scan() const {
  const uint64_t h = fnv1a(kFnvOffset, data_, bytes_);
  int64_t max_id = -1;
  if (dtype_ == TokenDtype::kUint16) {
    const auto* p = reinterpret_cast<const uint16_t*>(data_);
    for (int64_t i = 0; i < tokens_; ++i) max_id = std::max<int64_t>(max_id, p[i]);
  } else {
    const auto* p = reinterpret_cast<const uint32_t*>(data_);
    for (int64_t i = 0; i < tokens_; ++i) max_id = std::max<int64_t>(max_id, p[i]);
  }
  return {h, max_id};
}

// ---- TokenData ----

Result<TokenData> TokenData::open(const fs::path& dir, TokenDataOptions opts) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error(
        Code::kNotFound, "no token data folder at " + dir.string(),
        "make one: gpulab data tokenize --input FILES --tokenizer bytes --out " + dir.string());
  auto text = read_file(dir / "meta.json");
  if (!text)
    return Error(Code::kNotFound,
                 "no meta.json in " + dir.string() +
                     " (not a token folder, or "
                     "tokenizing did not finish)",
                 kRegenerate);
  auto meta = token_meta_from_json(*text);
  if (!meta) {
    Error e = meta.error();
    e.message = (dir / "meta.json").string() + ": " + e.message;
    if (e.hint.empty()) e.hint = kRegenerate;
    return e;
  }
  TokenData d;
  d.dir_ = dir;
  d.meta_ = std::move(*meta);
  for (auto [name, split, slot] :
       {std::tuple{"train.bin", &d.meta_.train, &d.train_}, {"val.bin", &d.meta_.val, &d.val_}}) {
    auto f = TokenFile::open(dir / name, d.meta_.dtype, split->tokens);
    if (!f) return f.error();
    *slot = std::make_unique<TokenFile>(std::move(*f));
    if (!opts.verify) continue;
    auto [sum, max_id] = (*slot)->scan();
    if (sum != split->checksum)
      return Error(Code::kDataError,
                   fmt::format("{} is corrupt: its checksum {} differs from meta.json's {}",
                               (dir / name).string(), hex64(sum), hex64(split->checksum)),
                   kRegenerate);
    if (max_id >= d.meta_.vocab_size)
      return Error(Code::kDataError,
                   fmt::format("{} holds token id {}, outside the vocabulary of {}",
                               (dir / name).string(), max_id, d.meta_.vocab_size),
                   kRegenerate);
  }
  return d;
}

std::string TokenData::tokenizer_spec() const {
  if (meta_.tokenizer == "bytes" || meta_.tokenizer_model.empty()) return meta_.tokenizer;
  return (dir_ / meta_.tokenizer_model).string();
}

Status TokenData::check_vocab(int64_t model_vocab) const {
  if (meta_.vocab_size > model_vocab)
    return Error(Code::kInvalidArgument,
                 fmt::format("vocabulary mismatch: the data in {} was tokenized with {} ids ({}), "
                             "the model has {}",
                             dir_.string(), meta_.vocab_size, meta_.tokenizer, model_vocab),
                 "use a model whose vocab_size is at least the tokenizer's, or tokenize the data "
                 "with the model's tokenizer");
  return ok_status();
}

Status TokenData::check_seq_len(int64_t seq_len, bool allow_empty_val) const {
  auto check = [&](const char* name, int64_t tokens) -> Status {
    if (tokens >= seq_len + 1) return ok_status();
    return Error(Code::kInvalidArgument,
                 fmt::format("{} in {} holds {} tokens, fewer than one window of --seq_len {} "
                             "(+1 for the targets)",
                             name, dir_.string(), tokens, seq_len),
                 "use a shorter --seq_len or more text");
  };
  if (seq_len <= 0) return Error(Code::kInvalidArgument, "--seq_len must be positive");
  if (auto s = check("train.bin", meta_.train.tokens); !s) return s;
  if (allow_empty_val && meta_.val.tokens == 0) return ok_status();
  return check("val.bin", meta_.val.tokens);
}

// ---- TokenWriter ----

struct TokenWriter::Out {
  fs::path final_path, partial_path;
  std::FILE* f = nullptr;
  uint64_t hash = kFnvOffset;
  uint64_t bytes = 0;  // written so far
  std::vector<unsigned char> buf;
};

namespace {

// A failed write of a split file: a full disk says so with the bytes the file needed so far.
Error write_error(const fs::path& final_path, const fs::path& partial_path, int err,
                  uint64_t needed) {
  if (is_no_space(err)) return no_space_error(final_path, needed);
  return Error(Code::kInternal,
               fmt::format("writing {} failed: {}", partial_path.string(), std::strerror(err)));
}

}  // namespace

Result<std::unique_ptr<TokenWriter>> TokenWriter::create(const fs::path& dir, TokenMeta meta,
                                                         bool overwrite) {
  std::error_code ec;
  if (fs::exists(dir / "meta.json", ec) && !overwrite)
    return Error(Code::kAlreadyExists, dir.string() + " already holds token data (meta.json)",
                 "choose another --out, or pass --overwrite to replace it");
  if (meta.vocab_size <= 0) return Error(Code::kInvalidArgument, "vocab_size must be positive");
  const bool created = !fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec)
    return Error(Code::kInvalidArgument,
                 fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  std::unique_ptr<TokenWriter> w(new TokenWriter());
  w->dir_ = dir;
  w->created_dir_ = created;
  meta.dtype = token_dtype_for_vocab(meta.vocab_size);
  meta.train = meta.val = TokenSplitMeta{};
  w->meta_ = std::move(meta);
  for (auto [name, slot] : {std::pair{"train.bin", &w->train_}, {"val.bin", &w->val_}}) {
    auto out = std::make_unique<Out>();
    out->final_path = dir / name;
    out->partial_path = dir / (std::string(name) + ".partial");
    out->f = std::fopen(out->partial_path.c_str(), "wb");
    if (!out->f)
      return Error(
          Code::kInvalidArgument,
          fmt::format("cannot write {}: {}", out->partial_path.string(), std::strerror(errno)));
    *slot = std::move(out);
  }
  return w;
}

TokenWriter::~TokenWriter() {
  // Unfinished: remove the partial files, so a failed run leaves nothing behind.
  for (auto* out : {train_.get(), val_.get()}) {
    if (!out) continue;
    if (out->f) std::fclose(out->f);
    if (!finished_) {
      std::error_code ec;
      fs::remove(out->partial_path, ec);
    }
  }
  std::error_code ec;
  if (!finished_ && created_dir_ && fs::is_empty(dir_, ec)) fs::remove(dir_, ec);
}

Status TokenWriter::append(Split split, const std::vector<int32_t>& ids, int64_t text_bytes) {
  GPULAB_ASSERT(!finished_, "append after finish");
  Out& out = split == Split::kTrain ? *train_ : *val_;
  TokenSplitMeta& m = split == Split::kTrain ? meta_.train : meta_.val;
  const int64_t width = token_width(meta_.dtype);
  out.buf.resize(ids.size() * static_cast<size_t>(width));
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= meta_.vocab_size)
      return Error(Code::kInternal,
                   fmt::format("token id {} outside the vocabulary of {}", id, meta_.vocab_size));
    if (width == 2) {
      const auto v = static_cast<uint16_t>(id);
      std::memcpy(out.buf.data() + 2 * i, &v, 2);
    } else {
      const auto v = static_cast<uint32_t>(id);
      std::memcpy(out.buf.data() + 4 * i, &v, 4);
    }
  }
  if (!out.buf.empty() && std::fwrite(out.buf.data(), 1, out.buf.size(), out.f) != out.buf.size())
    return write_error(out.final_path, out.partial_path, errno, out.bytes + out.buf.size());
  out.bytes += out.buf.size();
  out.hash = fnv1a(out.hash, out.buf.data(), out.buf.size());
  m.tokens += static_cast<int64_t>(ids.size());
  m.text_bytes += text_bytes;
  return ok_status();
}

Result<TokenMeta> TokenWriter::finish() {
  GPULAB_ASSERT(!finished_, "finish twice");
  meta_.train.checksum = train_->hash;
  meta_.val.checksum = val_->hash;
  for (auto* out : {train_.get(), val_.get()}) {
    const bool synced = std::fflush(out->f) == 0 && ::fsync(::fileno(out->f)) == 0;
    const int err = errno;
    const bool closed = std::fclose(out->f) == 0;
    out->f = nullptr;
    if (!synced || !closed)
      return write_error(out->final_path, out->partial_path, synced ? errno : err, out->bytes);
  }
  // meta.json is written (its space taken) before the old data stops counting: a full disk
  // here leaves a folder being replaced as it was.
  const std::string json = token_meta_to_json(meta_);
  auto meta_file = AtomicFile::create(dir_ / "meta.json", json.size());
  if (!meta_file) return meta_file.error();
  if (auto s = meta_file->write(json); !s) return s.error();
  // Old data being replaced stops counting first: a crash in between leaves no meta.json.
  std::error_code ec;
  fs::remove(dir_ / "meta.json", ec);
  for (auto* out : {train_.get(), val_.get()}) {
    fs::rename(out->partial_path, out->final_path, ec);
    if (ec)
      return Error(Code::kInternal,
                   fmt::format("cannot rename {}: {}", out->partial_path.string(), ec.message()));
  }
  if (auto s = meta_file->commit(); !s) return s.error();
  finished_ = true;
  return meta_;
}

}  // namespace gpulab::formats
