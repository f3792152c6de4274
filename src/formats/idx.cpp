// IDX parsing (see idx.h), plain or through zlib's inflate over the bytes in memory, reading no
// more than the header declares.
#include "formats/idx.h"

#include <fmt/format.h>

#if GPULAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace gpulab::formats {
namespace {

// Deflate cannot expand data by more than 1032:1 (zlib's technical details): a header claiming
// more than that from the compressed size lies, and is refused before anything is allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

uint32_t be32(std::string_view s, size_t off) {
  return (uint32_t{static_cast<unsigned char>(s[off])} << 24) |
         (uint32_t{static_cast<unsigned char>(s[off + 1])} << 16) |
         (uint32_t{static_cast<unsigned char>(s[off + 2])} << 8) |
         uint32_t{static_cast<unsigned char>(s[off + 3])};
}

Error corrupt(const std::string& detail) {
  return Error(Code::kDataError, detail);
}

// The header's shape and data size (`total`, without overflow).
Result<std::vector<int64_t>> parse_header(std::string_view header, int dims, uint64_t& total) {
  const uint32_t magic = be32(header, 0);
  if (magic != 0x800u + static_cast<uint32_t>(dims))
    return corrupt(fmt::format("magic 0x{:08x}, expected 0x{:08x} (uint8, {} dims)", magic,
                               0x800 + dims, dims));
  std::vector<int64_t> shape;
  total = 1;
  for (int d = 0; d < dims; ++d) {
    const uint64_t n = be32(header, 4 + 4 * static_cast<size_t>(d));
    shape.push_back(static_cast<int64_t>(n));
    total = n != 0 && total > UINT64_MAX / n ? UINT64_MAX : total * n;
  }
  return shape;
}

#if GPULAB_HAVE_ZLIB
// Inflates gzip members (one after another, as gzip -c a b > c makes) into caller buffers.
class Inflater {
 public:
  explicit Inflater(std::string_view in) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z_.avail_in = static_cast<uInt>(in.size());
    ok_ = inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK;
  }
  ~Inflater() {
    if (ok_) inflateEnd(&z_);
  }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Fills up to n bytes; returns how many came (fewer only at the end of the data).
  Result<size_t> read(char* out, size_t n) {
    if (!ok_) return corrupt("gzip data is corrupt: zlib could not start");
    size_t got = 0;
    while (got < n) {
      if (ended_ && z_.avail_in == 0) break;
      if (ended_ && inflateReset(&z_) != Z_OK) return corrupt("gzip data is corrupt");
      ended_ = false;
      z_.next_out = reinterpret_cast<Bytef*>(out + got);
      z_.avail_out = static_cast<uInt>(std::min<size_t>(n - got, 1u << 30));
      const uInt before = z_.avail_out;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      got += before - z_.avail_out;
      if (rc == Z_STREAM_END) {
        ended_ = true;
      } else if (rc == Z_BUF_ERROR && z_.avail_in == 0) {
        return corrupt("gzip stream ends early: unexpected end of file");
      } else if (rc != Z_OK) {
        return corrupt(std::string("gzip data is corrupt: ") + (z_.msg ? z_.msg : "bad data"));
      }
    }
    return got;
  }

 private:
  z_stream z_{};
  bool ok_ = false;
  bool ended_ = false;
};
#endif

Result<IdxArray> parse_plain(std::string_view bytes, int dims) {
  const size_t header = 4 + 4 * static_cast<size_t>(dims);
  if (bytes.size() < header) return corrupt("shorter than its header");
  uint64_t total = 0;
  auto shape = parse_header(bytes.substr(0, header), dims, total);
  if (!shape) return shape.error();
  if (bytes.size() - header != total)
    return corrupt(
        fmt::format("holds {} data bytes, its header says {}", bytes.size() - header, total));
  return IdxArray{std::move(*shape), std::string(bytes.substr(header))};
}

Result<IdxArray> parse_gzip(std::string_view bytes, int dims) {
#if GPULAB_HAVE_ZLIB
  if (bytes.size() > UINT32_MAX) return corrupt("a gzipped IDX file over 4 GiB is not supported");
  Inflater in(bytes);
  std::string header(4 + 4 * static_cast<size_t>(dims), '\0');
  auto got = in.read(header.data(), header.size());
  if (!got) return got.error();
  if (*got < header.size()) return corrupt("shorter than its header");
  uint64_t total = 0;
  auto shape = parse_header(header, dims, total);
  if (!shape) return shape.error();
  if (total / kMaxDeflateRatio > bytes.size())
    return corrupt(fmt::format("its header says {} data bytes, more than {} gzipped bytes can hold",
                               total, bytes.size()));
  IdxArray out{std::move(*shape), std::string(static_cast<size_t>(total), '\0')};
  got = in.read(out.data.data(), out.data.size());
  if (!got) return got.error();
  if (*got < total)
    return corrupt(fmt::format("holds {} data bytes, its header says {}", *got, total));
  char extra = 0;
  got = in.read(&extra, 1);
  if (!got) return got.error();
  if (*got > 0)
    return corrupt(fmt::format("holds more data bytes than its header says ({})", total));
  return out;
#else
  (void)bytes;
  (void)dims;
  return Error(Code::kUnsupported, "gpulab was built without zlib; unpack the file with gunzip");
#endif
}

}  // namespace

Result<IdxArray> parse_idx(std::string_view bytes, int dims) {
  return is_gzip(bytes) ? parse_gzip(bytes, dims) : parse_plain(bytes, dims);
}

}  // namespace gpulab::formats
