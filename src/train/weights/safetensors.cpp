// safetensors I/O and the strict state-dict load (see safetensors.h). Every way a file can be
// wrong ends in a one-line DataError naming the problem, never in a crash.
#include "train/weights/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "core/atomic_file.h"
#include "core/files.h"
#include "core/json.h"

namespace gpulab::train {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit
constexpr size_t kMaxListed = 8;                    // names listed per category in errors

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

Error data_error(std::string_view what, const std::string& message) {
  return Error{Code::kDataError, std::string(what) + ": " + message};
}

}  // namespace

std::string safetensors_dtype_name(torch::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return {};
}

Result<SafetensorsFile> parse_safetensors(std::string_view bytes, std::string_view what) {
  if (bytes.size() < 8) {
    return data_error(what, "not a safetensors file: " + std::to_string(bytes.size()) +
                                " bytes, too short for the 8-byte header length");
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > kMaxHeaderBytes) {
    return data_error(what, "malformed safetensors header: header length " +
                                std::to_string(header_len) + " is implausible");
  }
  if (header_len > bytes.size() - 8) {
    return data_error(what, "truncated: the header needs " + std::to_string(header_len) +
                                " bytes but the file has " + std::to_string(bytes.size() - 8) +
                                " after the length");
  }
  auto parsed = parse_json(bytes.substr(8, header_len), "safetensors header");
  if (!parsed.ok()) {
    const std::string& m = parsed.error().message;  // parse_json may already say "malformed"
    return data_error(what, m.rfind("malformed", 0) == 0 ? m : "malformed " + m);
  }
  const Json& header = *parsed;
  if (!header.is_object()) return data_error(what, "malformed safetensors header: not an object");

  const std::string_view data = bytes.substr(8 + header_len);
  SafetensorsFile file;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return data_error(what, "malformed __metadata__: not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          return data_error(what, "malformed __metadata__: '" + k + "' not a string");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string bad = "malformed header entry '" + name + "': ";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      return data_error(what, bad + "needs dtype, shape and data_offsets");
    }
    const Json& jd = entry["dtype"];
    const Json& js = entry["shape"];
    const Json& jo = entry["data_offsets"];
    if (!jd.is_string()) return data_error(what, bad + "dtype is not a string");
    const std::string dtype = jd.get<std::string>();
    const auto* d = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                 [&](const DtypeEntry& e) { return dtype == e.name; });
    if (d == std::end(kDtypes)) {
      return data_error(what, bad + "unsupported dtype '" + dtype +
                                  "' (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
    }
    if (!js.is_array()) return data_error(what, bad + "shape is not a list");
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    for (const Json& dim : js) {
      if (!dim.is_number_unsigned() || dim.get<uint64_t>() > (1ull << 40)) {
        return data_error(what, bad + "shape has a bad dimension " + dim.dump());
      }
      shape.push_back(dim.get<int64_t>());
      numel *= dim.get<uint64_t>();
      if (numel > (1ull << 40)) return data_error(what, bad + "shape is implausibly large");
    }
    if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
        !jo[1].is_number_unsigned()) {
      return data_error(what, bad + "data_offsets must be [begin, end]");
    }
    const uint64_t begin = jo[0].get<uint64_t>();
    const uint64_t end = jo[1].get<uint64_t>();
    const uint64_t elem = c10::elementSize(d->type);
    if (end < begin || end - begin != numel * elem) {
      return data_error(what, bad + "data_offsets [" + std::to_string(begin) + "," +
                                  std::to_string(end) + "] do not match " + dtype + " " +
                                  shape_string(shape) + " (" + std::to_string(numel * elem) +
                                  " bytes)");
    }
    if (end > data.size()) {
      return data_error(what, "truncated: tensor '" + name + "' ends at byte " +
                                  std::to_string(end) + " of the data, which has only " +
                                  std::to_string(data.size()) + " bytes");
    }
    ranges.emplace_back(begin, end);
    auto tensor = torch::empty(shape, torch::TensorOptions().dtype(d->type));
    if (numel > 0) std::memcpy(tensor.data_ptr(), data.data() + begin, end - begin);
    file.tensors.emplace(name, std::move(tensor));
  }
  // The format forbids overlapping tensors; overlaps mean a corrupt or hand-made header.
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second && ranges[i].first != ranges[i].second) {
      return data_error(what, "malformed safetensors header: tensor data ranges overlap");
    }
  }
  return file;
}

Result<SafetensorsFile> read_safetensors(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Error{Code::kNotFound, path.string() + ": no such file"};
  }
  auto bytes = read_file(path);
  if (!bytes.ok()) return bytes.error();
  return parse_safetensors(*bytes, path.string());
}

namespace {

// The 8-byte header length and the JSON header (padded to 8 bytes), and the tensors in file
// order as contiguous CPU tensors (no copy for those that are already).
struct Layout {
  std::string head;
  std::vector<torch::Tensor> cpu;
  uint64_t data_bytes = 0;
};

Result<Layout> layout_of(const StateDict& tensors,
                         const std::map<std::string, std::string>& metadata) {
  OrderedJson header = OrderedJson::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  Layout l;
  for (const auto& [name, t] : tensors) {
    const std::string dtype = safetensors_dtype_name(t.scalar_type());
    if (dtype.empty()) {
      return Error{Code::kInvalidArgument, "tensor '" + name + "' has dtype " +
                                               std::string(c10::toString(t.scalar_type())) +
                                               ", which safetensors cannot hold"};
    }
    l.cpu.push_back(t.detach().to(torch::kCPU).contiguous());
    const uint64_t size = l.cpu.back().numel() * l.cpu.back().element_size();
    header[name] = {{"dtype", dtype},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {l.data_bytes, l.data_bytes + size}}};
    l.data_bytes += size;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');  // keeps the data 8-byte aligned
  const uint64_t header_len = json.size();
  l.head.assign(8, '\0');
  std::memcpy(l.head.data(), &header_len, 8);
  l.head += json;
  return l;
}

std::string_view bytes_of(const torch::Tensor& t) {
  return {static_cast<const char*>(t.data_ptr()),
          static_cast<size_t>(t.numel() * t.element_size())};
}

}  // namespace

Result<std::string> serialize_safetensors(const StateDict& tensors,
                                          const std::map<std::string, std::string>& metadata) {
  auto l = layout_of(tensors, metadata);
  if (!l.ok()) return l.error();
  std::string out;
  out.reserve(l->head.size() + l->data_bytes);
  out += l->head;
  for (const auto& t : l->cpu) out += bytes_of(t);
  return out;
}

Status write_safetensors(const std::filesystem::path& path, const StateDict& tensors,
                         const std::map<std::string, std::string>& metadata) {
  auto l = layout_of(tensors, metadata);
  if (!l.ok()) return l.error();
  // Tensor by tensor: a serialized copy of the whole model would double the writer's memory
  // (rank 0 at the end of a run, where --rank_memory_max caps it).
  auto file = AtomicFile::create(path);
  if (!file.ok()) return file.error();
  if (auto st = file->write(l->head); !st) return st;
  for (const auto& t : l->cpu)
    if (auto st = file->write(bytes_of(t)); !st) return st;
  return file->commit();
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
