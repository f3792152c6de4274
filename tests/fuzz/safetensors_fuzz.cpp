// libFuzzer target over the safetensors header and offsets (formats/safetensors_header.cpp):
// whatever it accepts lies inside the file, adds up to its dtype and shape (end - begin = numel
// x element size, a known dtype, no negative dimension, at most 2^40 elements) and overlaps no
// other tensor's bytes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/safetensors_header.h"
#include "fuzz_check.h"

namespace {

using namespace gpulab;

[[noreturn]] void fail(const formats::SafetensorsEntry& t, const char* what) {
  std::fprintf(stderr, "safetensors fuzz: accepted '%s' (%s, bytes %llu..%llu): %s\n",
               t.name.c_str(), t.dtype.c_str(), static_cast<unsigned long long>(t.begin),
               static_cast<unsigned long long>(t.end), what);
  std::abort();
}

int element_size(const std::string& dtype) {
  for (const auto& d : formats::kSafetensorsDtypes)
    if (dtype == d.name) return d.element_size;
  return 0;
}

// The promise of the header's shape: numel x element size bytes, numel at most 2^40.
void check_size(const formats::SafetensorsEntry& t) {
  const int elem = element_size(t.dtype);
  if (elem == 0) fail(t, "a dtype the reader does not know");
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) fail(t, "a negative dimension");
    if (d > 0 && numel > (uint64_t{1} << 40) / static_cast<uint64_t>(d))
      fail(t, "more than 2^40 elements");
    numel *= static_cast<uint64_t>(d);
  }
  if (t.end - t.begin != numel * static_cast<uint64_t>(elem))
    fail(t, "its byte range is not numel x element size");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto h = formats::parse_safetensors_header(bytes, "fuzz.safetensors");
  if (!h.ok()) {
    fuzz::check_refusal(h.error());
    return 0;
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& t : h->tensors) {
    if (t.end < t.begin || t.end > h->data.size()) fail(t, "its bytes lie outside the file");
    check_size(t);
    fuzz::touch(h->data.data() + t.begin, t.end - t.begin);
    if (t.end > t.begin) ranges.emplace_back(t.begin, t.end);  // empty tensors overlap nothing
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) {
      std::fprintf(stderr, "safetensors fuzz: accepted overlapping byte ranges at %llu\n",
                   static_cast<unsigned long long>(ranges[i].first));
      std::abort();
    }
  return 0;
}
