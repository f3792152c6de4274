// safetensors reads and the strict state-dict load (see safetensors.h). The header and offsets
// are checked in formats/safetensors_header.cpp; here bytes become tensors (safetensors_writer.cpp
// turns tensors into bytes).
#include "train/weights/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/files.h"
#include "core/mapped_file.h"
#include "formats/safetensors_header.h"

namespace gpulab::train {
namespace {

constexpr size_t kMaxListed = 8;  // names listed per category in errors

struct DtypeEntry {
  const char* name;
  torch::ScalarType type;
};
constexpr DtypeEntry kDtypes[] = {
    {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
    {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
    {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
};

std::string shape_string(c10::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// "a, b, c and 5 more"
std::string name_list(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < kMaxListed; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kMaxListed) s += " and " + std::to_string(names.size() - kMaxListed) + " more";
  return s;
}

}  // namespace

std::string safetensors_dtype_name(torch::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return {};
}

namespace {

// The tensors of a whole file's bytes: views of them where `keep` maps the file (its data
// aligned for the dtype, as writers lay it out), so only the pages a caller touches are read;
// copies otherwise.
Result<SafetensorsFile> tensors_of(std::string_view bytes, std::string_view what,
                                   const std::shared_ptr<MappedFile>& keep) {
  // The header is checked whole (formats/) before the first tensor is allocated.
  auto header = formats::parse_safetensors_header(bytes, what);
  if (!header.ok()) return header.error();
  SafetensorsFile file;
  file.metadata = std::move(header->metadata);
  for (const auto& e : header->tensors) {
    const auto* d = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                 [&](const DtypeEntry& t) { return e.dtype == t.name; });
    GPULAB_ASSERT(d != std::end(kDtypes), "formats and train list the same safetensors dtypes");
    const auto options = torch::TensorOptions().dtype(d->type);
    // Within the bytes (parse_safetensors_header checked each range); a mapping is private and
    // writable, so a caller may change the tensor in place.
    char* at = const_cast<char*>(header->data.data()) + e.begin;
    const bool aligned = reinterpret_cast<uintptr_t>(at) % c10::elementSize(d->type) == 0;
    torch::Tensor tensor;
    if (keep && aligned && e.end > e.begin) {
      tensor = torch::from_blob(
          at, e.shape, [keep](void*) {}, options);
    } else {
      tensor = torch::empty(e.shape, options);
      if (e.end > e.begin) std::memcpy(tensor.data_ptr(), at, e.end - e.begin);
    }
    file.tensors.emplace(e.name, std::move(tensor));
  }
  return file;
}

}  // namespace

Result<SafetensorsFile> parse_safetensors(std::string_view bytes, std::string_view what) {
  return tensors_of(bytes, what, nullptr);
}

Result<SafetensorsFile> read_safetensors(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Error{Code::kNotFound, path.string() + ": no such file"};
  }
  // Mapped: a rank takes its share of a file larger than its memory (a pipeline stage its
  // stage's tensors, a TP rank its slices), and nothing is copied twice. Read whole where the
  // file cannot be mapped.
  if (auto mapped = MappedFile::open(path); mapped.ok())
    return tensors_of((*mapped)->bytes(), path.string(), *mapped);
  auto bytes = read_file(path);
  if (!bytes.ok()) return bytes.error();
  return parse_safetensors(*bytes, path.string());
}

StateDict module_state_dict(const torch::nn::Module& module) {
  StateDict dict;
  for (const auto& p : module.named_parameters(true)) dict[p.key()] = p.value().detach();
  for (const auto& b : module.named_buffers(true)) dict[b.key()] = b.value().detach();
  return dict;
}

Status load_state_dict(torch::nn::Module& module, const StateDict& weights, std::string_view what) {
  StateDict target;
  for (const auto& p : module.named_parameters(true)) target[p.key()] = p.value();
  for (const auto& b : module.named_buffers(true)) target[b.key()] = b.value();

  std::vector<std::string> missing, unexpected, wrong_shape, wrong_dtype;
  for (const auto& [name, t] : target) {
    auto it = weights.find(name);
    if (it == weights.end()) {
      missing.push_back(name);
    } else if (it->second.sizes() != t.sizes()) {
      wrong_shape.push_back(name + " " + shape_string(it->second.sizes()) + " vs model " +
                            shape_string(t.sizes()));
    } else if (it->second.is_floating_point() != t.is_floating_point() ||
               it->second.scalar_type() == torch::kBool) {
      wrong_dtype.push_back(name + " " + safetensors_dtype_name(it->second.scalar_type()) +
                            " vs model " + safetensors_dtype_name(t.scalar_type()));
    }
  }
  for (const auto& [name, t] : weights) {
    if (!target.count(name)) unexpected.push_back(name);
  }
  if (!missing.empty() || !unexpected.empty() || !wrong_shape.empty() || !wrong_dtype.empty()) {
    std::string msg = std::string(what) + " do not fit the model:";
    std::string sep = " ";
    auto part = [&](const std::vector<std::string>& names, const char* label) {
      if (names.empty()) return;
      msg += sep + std::to_string(names.size()) + " " + label + " (" + name_list(names) + ")";
      sep = "; ";
    };
    part(missing, "missing");
    part(unexpected, "unexpected");
    part(wrong_shape, "with wrong shape");
    part(wrong_dtype, "with wrong dtype");
    return Error{Code::kInvalidArgument, msg};
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : target) t.copy_(weights.at(name));
  return ok_status();
}

}  // namespace gpulab::train
