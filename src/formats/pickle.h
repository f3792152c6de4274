// A small reader for Python pickles as the CIFAR archives use them: protocol 2 as Python 2's
// cPickle wrote it (BINSTRING data, numpy _reconstruct/ndarray/dtype GLOBALs) and the same data
// re-pickled by Python 3 (protocols 3-5: BINBYTES, SHORT_BINUNICODE, FRAME, MEMOIZE,
// STACK_GLOBAL, BYTEARRAY8 with numpy's _frombuffer). Nothing is executed: calls stay as data.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab::formats::pickle {

struct Value;
// Values point at each other (a pickle may share or even cycle through them); the Document that
// parse() returns owns them all, so neither cycles nor deep nesting matter when it goes.
using ValuePtr = Value*;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kBytes,
    kString,
    kList,
    kTuple,
    kDict,
    kGlobal,
    kCall
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;                                       // kInt, kBool
  double f = 0;                                        // kFloat
  std::string s;                                       // kBytes, kString; kGlobal: "module.name"
  std::vector<ValuePtr> items;                         // kList, kTuple; kCall: {callable, args}
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // kDict, in insertion order
  ValuePtr state;  // kCall: what BUILD gave it (e.g. an ndarray's shape/dtype/data)

  bool is_text() const { return kind == Kind::kBytes || kind == Kind::kString; }
  // Dict lookup by text key (str or bytes alike, as latin1 loading treats them); null if absent.
  ValuePtr get(std::string_view key) const;
};

// Python 3 pickles bytes under protocol 2 as _codecs.encode(text, 'latin1'); this turns the
// text (held as UTF-8) back into those bytes.
Result<std::string> latin1_from_utf8(const std::string& s);

// The values of one parsed pickle, alive as long as the Document.
struct Document {
  std::vector<std::unique_ptr<Value>> values;
  ValuePtr root = nullptr;
};

// Parses a whole pickle. kDataError with the offset of the first problem (truncation, an
// unknown opcode, a stack underflow, a bad number, more values than a data set pickle holds).
Result<Document> parse(std::string_view data);

// A numpy array decoded from its pickled form: dtype as numpy's string ("u1", "<i8"), shape,
// and the raw bytes in C order.
struct NdArray {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
  int64_t numel() const;
};

// Interprets numpy's reconstruct (_reconstruct + BUILD state) or _frombuffer forms.
Result<NdArray> to_ndarray(const Value& v);
// A list/tuple of ints, or a 1-D integer ndarray, as int64 values.
Result<std::vector<int64_t>> to_int_list(const Value& v);
// A list/tuple of str/bytes.
Result<std::vector<std::string>> to_string_list(const Value& v);

}  // namespace gpulab::formats::pickle
