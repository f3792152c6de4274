// CIFAR Python batches (see cifar_batch.h): the pickle parsed, its array and labels checked.
#include "formats/cifar_batch.h"

#include <fmt/format.h>

#include "formats/pickle.h"

namespace gpulab::formats {

Result<CifarBatch> parse_cifar_python_batch(std::string_view bytes, const char* label_key,
                                            int64_t num_classes) {
  auto doc = pickle::parse(bytes);
  if (!doc) return doc.error();
  const pickle::Value& root = *doc->root;
  const auto bad = [](const std::string& what) { return Error(Code::kDataError, what); };
  if (root.kind != pickle::Value::Kind::kDict) return bad("the pickle is not a dict");
  auto data = root.get("data");
  auto lab = root.get(label_key);
  if (!data || !lab) return bad(std::string("no 'data' or '") + label_key + "' entry");
  auto arr = pickle::to_ndarray(*data);
  if (!arr) return arr.error();
  if (arr->dtype != "u1" && arr->dtype != "|u1") return bad("image data has dtype " + arr->dtype);
  if (arr->shape.size() != 2 || arr->shape[1] != kCifarPixels)
    return bad("image data is not N×3072");
  auto labels = pickle::to_int_list(*lab);
  if (!labels) return labels.error();
  const int64_t n = arr->shape[0];
  if (static_cast<int64_t>(labels->size()) != n)
    return bad(fmt::format("{} images but {} labels", n, labels->size()));
  for (size_t k = 0; k < labels->size(); ++k) {
    const int64_t label = (*labels)[k];
    if (label < 0 || label >= num_classes)
      return bad(fmt::format("label {} of image {} is outside 0..{}", label, k, num_classes - 1));
  }
  return CifarBatch{n, std::move(arr->data), std::move(*labels)};
}

std::vector<std::string> parse_cifar_label_names(std::string_view bytes, const char* key) {
  auto doc = pickle::parse(bytes);
  if (!doc || doc->root->kind != pickle::Value::Kind::kDict) return {};
  auto v = doc->root->get(key);
  if (!v) return {};
  auto names = pickle::to_string_list(*v);
  return names ? *names : std::vector<std::string>{};
}

}  // namespace gpulab::formats
