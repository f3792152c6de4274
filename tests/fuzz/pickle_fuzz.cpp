// libFuzzer target over the pickle reader and the CIFAR batch on it (formats/pickle.cpp,
// pickle_numpy.cpp, cifar_batch.cpp): a batch it accepts has N×3072 pixels and N labels in range.
#include <cstdint>
#include <string_view>

#include "formats/cifar_batch.h"
#include "formats/pickle.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpulab;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto batch = formats::parse_cifar_python_batch(bytes, "labels", 10);
  if (batch.ok()) {
    if (batch->pixels.size() != static_cast<size_t>(batch->count * formats::kCifarPixels) ||
        batch->labels.size() != static_cast<size_t>(batch->count))
      std::abort();
    for (int64_t l : batch->labels)
      if (l < 0 || l >= 10) std::abort();
  } else {
    fuzz::check_refusal(batch.error());
  }
  formats::parse_cifar_label_names(bytes, "label_names");
  // Every value of the document through the numpy and list readers.
  auto doc = formats::pickle::parse(bytes);
  if (!doc.ok()) return 0;
  for (const auto& v : doc->values) {
    if (auto a = formats::pickle::to_ndarray(*v); a.ok())
      fuzz::touch(a->data.data(), a->data.size());
    (void)formats::pickle::to_int_list(*v);
    (void)formats::pickle::to_string_list(*v);
  }
  return 0;
}
