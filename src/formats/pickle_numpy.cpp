// numpy arrays in pickles: interprets the _reconstruct (+ BUILD state) and _frombuffer calls
// that numpy's pickling leaves, without running anything, into dtype, shape and raw bytes.
#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"
#include "formats/pickle.h"

namespace gpulab::formats::pickle {

namespace {

using Kind = Value::Kind;

bool is_global(const ValuePtr& v, std::string_view suffix) {
  if (!v || v->kind != Kind::kGlobal) return false;
  return v->s.size() >= suffix.size() &&
         v->s.compare(v->s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Bytes of a value that holds raw data: bytes, str (latin1) or _codecs.encode(...).
Result<std::string> raw_bytes(const Value& v) {
  if (v.kind == Kind::kBytes) return v.s;
  if (v.kind == Kind::kString) return latin1_from_utf8(v.s);
  if (v.kind == Kind::kCall && is_global(v.items[0], "_codecs.encode") &&
      v.items[1]->kind == Kind::kTuple && !v.items[1]->items.empty() &&
      v.items[1]->items[0]->kind == Kind::kString)
    return latin1_from_utf8(v.items[1]->items[0]->s);
  return Result<std::string>(Code::kDataError, "array data is not a byte string");
}

Result<std::string> dtype_string(const Value& v) {
  if (v.kind != Kind::kCall || !is_global(v.items[0], "numpy.dtype") ||
      v.items[1]->kind != Kind::kTuple || v.items[1]->items.empty() ||
      !v.items[1]->items[0]->is_text())
    return Result<std::string>(Code::kDataError, "array dtype is not a numpy dtype");
  std::string t = v.items[1]->items[0]->s;
  char order = '|';
  if (v.state && v.state->kind == Kind::kTuple && v.state->items.size() > 1 &&
      v.state->items[1]->is_text() && v.state->items[1]->s.size() == 1)
    order = v.state->items[1]->s[0];
  if (order == '<' || order == '>') return std::string(1, order) + t;
  return t;
}

int64_t item_size(const std::string& dtype) {
  std::string t = dtype;
  if (!t.empty() && (t[0] == '<' || t[0] == '>' || t[0] == '|' || t[0] == '=')) t = t.substr(1);
  if (t.size() < 2) return 0;
  try {
    return std::stoll(t.substr(1));
  } catch (const std::exception&) {
    return 0;
  }
}

Result<std::vector<int64_t>> int_tuple(const Value& v) {
  if (v.kind == Kind::kInt) return std::vector<int64_t>{v.i};
  if (v.kind != Kind::kTuple && v.kind != Kind::kList)
    return Result<std::vector<int64_t>>(Code::kDataError, "expected a tuple of integers");
  std::vector<int64_t> out;
  for (const auto& x : v.items) {
    if (x->kind != Kind::kInt)
      return Result<std::vector<int64_t>>(Code::kDataError, "expected an integer");
    out.push_back(x->i);
  }
  return out;
}

// The shape's byte count, checked against the bytes present without overflowing: a shape that
// claims more than the data holds is refused before anyone sizes a buffer by it.
Result<NdArray> finish(NdArray a) {
  const int64_t isz = item_size(a.dtype);
  if (isz <= 0 || isz > 16)
    return Result<NdArray>(Code::kDataError, "unsupported dtype '" + printable(a.dtype) + "'");
  const auto have = static_cast<uint64_t>(a.data.size());
  uint64_t need = static_cast<uint64_t>(isz);
  for (int64_t d : a.shape) {
    if (d < 0) return Result<NdArray>(Code::kDataError, fmt::format("array dimension {}", d));
    if (d != 0 && need > have / static_cast<uint64_t>(d))
      return Result<NdArray>(Code::kDataError,
                             fmt::format("array holds {} bytes, its shape needs more", have));
    need *= static_cast<uint64_t>(d);
  }
  if (have != need)
    return Result<NdArray>(
        Code::kDataError,
        fmt::format("array holds {} bytes, its shape needs {} (truncated?)", have, need));
  return a;
}

}  // namespace

int64_t NdArray::numel() const {
  // A checked array's product fits its byte count; a zero anywhere makes it empty, however large
  // the other dimensions (whose product alone could overflow).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

Result<NdArray> to_ndarray(const Value& v) {
  if (v.kind != Kind::kCall) return Result<NdArray>(Code::kDataError, "value is not an array");
  const auto& fn = v.items[0];
  const auto& args = *v.items[1];
  NdArray a;
  if (is_global(fn, "multiarray._reconstruct")) {
    // state: (version, shape, dtype, is_fortran, data), or without the version (old numpy).
    if (!v.state || v.state->kind != Kind::kTuple)
      return Result<NdArray>(Code::kDataError, "numpy array without its state");
    auto st = v.state->items;
    if (st.size() == 5) st.erase(st.begin());
    if (st.size() != 4) return Result<NdArray>(Code::kDataError, "numpy array state has bad size");
    auto shape = int_tuple(*st[0]);
    if (!shape) return shape.error();
    auto dt = dtype_string(*st[1]);
    if (!dt) return dt.error();
    if (st[2]->kind == Kind::kBool && st[2]->i && shape->size() > 1)
      return Result<NdArray>(Code::kDataError, "Fortran-ordered arrays are not supported");
    auto bytes = raw_bytes(*st[3]);
    if (!bytes) return bytes.error();
    a.shape = std::move(*shape);
    a.dtype = std::move(*dt);
    a.data = std::move(*bytes);
    return finish(std::move(a));
  }
  if (is_global(fn, "numeric._frombuffer")) {
    // args: (buffer, dtype, shape, order)
    if (args.kind != Kind::kTuple || args.items.size() < 3)
      return Result<NdArray>(Code::kDataError, "numpy _frombuffer with bad arguments");
    auto bytes = raw_bytes(*args.items[0]);
    if (!bytes) return bytes.error();
    auto dt = dtype_string(*args.items[1]);
    if (!dt) return dt.error();
    auto shape = int_tuple(*args.items[2]);
    if (!shape) return shape.error();
    if (args.items.size() > 3 && args.items[3]->is_text() && args.items[3]->s == "F" &&
        shape->size() > 1)
      return Result<NdArray>(Code::kDataError, "Fortran-ordered arrays are not supported");
    a.shape = std::move(*shape);
    a.dtype = std::move(*dt);
    a.data = std::move(*bytes);
    return finish(std::move(a));
  }
  return Result<NdArray>(
      Code::kDataError,
      "value is not a numpy array (" + (fn->kind == Kind::kGlobal ? printable(fn->s) : "?") + ")");
}

Result<std::vector<int64_t>> to_int_list(const Value& v) {
  if (v.kind == Kind::kList || v.kind == Kind::kTuple) return int_tuple(v);
  auto a = to_ndarray(v);
  if (!a) return a.error();
  std::string t = a->dtype;
  bool big = !t.empty() && t[0] == '>';
  if (!t.empty() && (t[0] == '<' || t[0] == '>' || t[0] == '|' || t[0] == '=')) t = t.substr(1);
  int64_t isz = item_size(a->dtype);
  if ((t[0] != 'i' && t[0] != 'u') || isz > 8)
    return Result<std::vector<int64_t>>(Code::kDataError, "labels are not integers");
  std::vector<int64_t> out(static_cast<size_t>(a->numel()));
  for (size_t k = 0; k < out.size(); ++k) {
    uint64_t x = 0;
    for (int64_t b = 0; b < isz; ++b) {
      int64_t idx = big ? b : isz - 1 - b;
      x = (x << 8) | static_cast<unsigned char>(a->data[k * isz + idx]);
    }
    if (t[0] == 'i' && isz < 8 && (x >> (8 * isz - 1)) & 1) x |= ~uint64_t{0} << (8 * isz);
    out[k] = static_cast<int64_t>(x);
  }
  return out;
}

Result<std::vector<std::string>> to_string_list(const Value& v) {
  if (v.kind != Kind::kList && v.kind != Kind::kTuple)
    return Result<std::vector<std::string>>(Code::kDataError, "expected a list of strings");
  std::vector<std::string> out;
  for (const auto& x : v.items) {
    if (!x->is_text())
      return Result<std::vector<std::string>>(Code::kDataError, "expected a list of strings");
    out.push_back(x->s);
  }
  return out;
}

}  // namespace gpulab::formats::pickle
