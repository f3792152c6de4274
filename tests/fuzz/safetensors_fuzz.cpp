// libFuzzer target over the safetensors header and offsets (formats/safetensors_header.cpp):
// whatever it accepts lies inside the file and adds up to its dtype and shape.
#include <cstdint>
#include <string_view>

#include "formats/safetensors_header.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpulab;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto h = formats::parse_safetensors_header(bytes, "fuzz.safetensors");
  if (!h.ok()) {
    fuzz::check_refusal(h.error());
    return 0;
  }
  for (const auto& t : h->tensors) {
    if (t.end < t.begin || t.end > h->data.size()) std::abort();
    fuzz::touch(h->data.data() + t.begin, t.end - t.begin);
  }
  return 0;
}
