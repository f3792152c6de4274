// libFuzzer target over IDX files, plain and gzipped (formats/idx.cpp): what it accepts holds
// exactly the bytes its header declares.
#include <cstdint>
#include <string_view>

#include "formats/idx.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpulab;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  for (int dims : {1, 3}) {
    auto idx = formats::parse_idx(bytes, dims);
    if (!idx.ok()) {
      fuzz::check_refusal(idx.error());
      continue;
    }
    uint64_t total = 1;
    for (int64_t d : idx->shape) {
      if (d < 0) std::abort();
      total *= static_cast<uint64_t>(d);
    }
    if (idx->shape.size() != static_cast<size_t>(dims) || idx->data.size() != total) std::abort();
  }
  return 0;
}
