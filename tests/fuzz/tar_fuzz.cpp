// libFuzzer target over core's tar reader (core/tar.cpp): the archive read from memory twice, as
// a file (size known, seeks) and as a stream (a gzip pipe: no size, no seek), every entry's data
// read or copied; and the one-block header parser the backup file uses.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "core/tar.h"
#include "fuzz_check.h"

namespace {

using namespace gpulab;

struct Memory {
  std::string_view bytes;
  size_t pos = 0;
  bool read(char* buf, size_t n) {
    if (n > bytes.size() - pos) return false;
    std::memcpy(buf, bytes.data() + pos, n);
    pos += n;
    return true;
  }
};

void walk(std::string_view bytes, bool as_file) {
  Memory m{bytes};
  TarInput in;
  in.what = "fuzz.tar";
  in.read = [&m](char* buf, size_t n) { return m.read(buf, n); };
  if (as_file) {
    in.size = static_cast<int64_t>(bytes.size());
    in.skip = [&m](int64_t n) {
      if (n < 0 || static_cast<uint64_t>(n) > m.bytes.size() - m.pos) return false;
      m.pos += static_cast<size_t>(n);
      return true;
    };
  }
  int k = 0;
  auto st = TarReader::for_each(in, [&](const TarEntry&, const TarReader::EntryData& data) {
    // Alternate between a bounded read and a streamed copy, as the callers do.
    if (k++ % 2 == 0) {
      auto r = data.read(1 << 16);
      if (r.ok()) fuzz::touch(r->data(), r->size());
    } else {
      (void)data.copy([](const char* p, size_t n) {
        fuzz::touch(p, n);
        return ok_status();
      });
    }
    return true;
  });
  if (!st.ok()) fuzz::check_refusal(st.error());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  walk(bytes, true);
  walk(bytes, false);
  if (size >= 512) (void)parse_tar_header_block(bytes.data());
  return 0;
}
