// safetensors header parsing and checks (see safetensors_header.h). Every way a file can be
// wrong ends in a one-line DataError naming the problem, before any tensor is allocated.
#include "formats/safetensors_header.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/json.h"
#include "core/strings.h"

namespace gpulab::formats {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference implementation's limit
constexpr uint64_t kMaxElements = 1ull << 40;

Error data_error(std::string_view what, const std::string& message) {
  return Error{Code::kDataError, std::string(what) + ": " + message};
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

const SafetensorsDtype* find_dtype(const std::string& name) {
  for (const auto& d : kSafetensorsDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

// The shape of one entry; elements counted without overflow (a claim of 2^80 is refused).
Result<std::vector<int64_t>> entry_shape(const Json& js, std::string_view what,
                                         const std::string& bad, uint64_t& numel) {
  if (!js.is_array()) return data_error(what, bad + "shape is not a list");
  std::vector<int64_t> shape;
  numel = 1;
  for (const Json& dim : js) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > kMaxElements) {
      return data_error(what, bad + "shape has a bad dimension " + dim.dump());
    }
    const uint64_t d = dim.get<uint64_t>();
    shape.push_back(static_cast<int64_t>(d));
    if (d != 0 && numel > kMaxElements / d) {
      return data_error(what, bad + "shape is implausibly large");
    }
    numel *= d;
  }
  return shape;
}

// One tensor's entry, checked against the data that follows the header.
Result<SafetensorsEntry> parse_entry(const std::string& name, const Json& entry,
                                     std::string_view data, std::string_view what) {
  const std::string bad = "malformed header entry '" + printable(name) + "': ";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    return data_error(what, bad + "needs dtype, shape and data_offsets");
  }
  const Json& jd = entry["dtype"];
  const Json& jo = entry["data_offsets"];
  if (!jd.is_string()) return data_error(what, bad + "dtype is not a string");
  SafetensorsEntry e;
  e.name = name;
  e.dtype = jd.get<std::string>();
  const SafetensorsDtype* d = find_dtype(e.dtype);
  if (!d) {
    return data_error(what, bad + "unsupported dtype '" + printable(e.dtype) +
                                "' (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)");
  }
  uint64_t numel = 0;
  auto shape = entry_shape(entry["shape"], what, bad, numel);
  if (!shape.ok()) return shape.error();
  e.shape = std::move(*shape);
  if (!jo.is_array() || jo.size() != 2 || !jo[0].is_number_unsigned() ||
      !jo[1].is_number_unsigned()) {
    return data_error(what, bad + "data_offsets must be [begin, end]");
  }
  e.begin = jo[0].get<uint64_t>();
  e.end = jo[1].get<uint64_t>();
  const uint64_t bytes = numel * static_cast<uint64_t>(d->element_size);
  if (e.end < e.begin || e.end - e.begin != bytes) {
    return data_error(what, bad + "data_offsets [" + std::to_string(e.begin) + "," +
                                std::to_string(e.end) + "] do not match " + e.dtype + " " +
                                shape_string(e.shape) + " (" + std::to_string(bytes) + " bytes)");
  }
  if (e.end > data.size()) {
    return data_error(what, "truncated: tensor '" + printable(name) + "' ends at byte " +
                                std::to_string(e.end) + " of the data, which has only " +
                                std::to_string(data.size()) + " bytes");
  }
  return e;
}

// The format forbids overlapping tensors; overlaps mean a corrupt or hand-made header. Empty
// tensors hold no bytes: they leave first, or one sorted between two overlapping ranges hides them.
bool ranges_overlap(std::vector<std::pair<uint64_t, uint64_t>> ranges) {
  std::erase_if(ranges, [](const auto& r) { return r.first == r.second; });
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) return true;
  }
  return false;
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(std::string_view bytes, std::string_view what) {
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

  SafetensorsHeader out;
  out.data = bytes.substr(8 + header_len);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return data_error(what, "malformed __metadata__: not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          return data_error(what, "malformed __metadata__: '" + printable(k) + "' not a string");
        out.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    auto e = parse_entry(name, entry, out.data, what);
    if (!e.ok()) return e.error();
    ranges.emplace_back(e->begin, e->end);
    out.tensors.push_back(std::move(*e));
  }
  if (ranges_overlap(std::move(ranges))) {
    return data_error(what, "malformed safetensors header: tensor data ranges overlap");
  }
  return out;
}

}  // namespace gpulab::formats
